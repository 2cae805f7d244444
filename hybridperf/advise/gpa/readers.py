"""Read a sample table in either supported format, detected from its header."""
from __future__ import annotations

import csv
import warnings
from pathlib import Path

from hybridperf.advise.gpa.errors import GPAInputError, GPAInputWarning
from hybridperf.advise.gpa.ncu import read_ncu_source_csv
from hybridperf.advise.gpa.plaincsv import read_plain_csv
from hybridperf.advise.gpa.samples import SampleTable
from hybridperf.advise.gpa.tableinput import read_text

__all__ = ["read_samples"]


def read_samples(path: str | Path, *, kernel: str | None = None) -> SampleTable:
    """Read a sample table, detecting the format from its header.

    A first line naming ``function``, ``pc`` or ``sass`` selects the plain CSV format
    (:func:`hybridperf.advise.gpa.plaincsv.read_plain_csv`); an Nsight Compute source-page export
    (``ncu --page source --csv --print-source sass``) is recognised by its
    ``"Address"``/``"Kernel Name"`` rows (:func:`hybridperf.advise.gpa.ncu.read_ncu_source_csv`,
    which ``kernel`` selects a table for).
    """
    p = Path(path)
    text = read_text(p)
    first = next(line for line in text.splitlines() if line.strip())
    header = {c.strip().lower() for c in next(csv.reader([first]))}
    if header & {"function", "pc", "sass"} and "address" not in header:
        if kernel is not None:
            warnings.warn(f"{p}: kernel={kernel!r} ignored for the plain CSV format",
                          GPAInputWarning, stacklevel=2)
        return read_plain_csv(p)
    if '"Address"' in text or "Kernel Name" in text or "Address," in text:
        return read_ncu_source_csv(p, kernel=kernel)
    raise GPAInputError(
        f"{p}: unrecognised sample table; expected a header function,pc,sass,issued,... or an "
        "export of `ncu --page source --csv --print-source sass`"
    )
