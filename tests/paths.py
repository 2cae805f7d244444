"""Where the repository, the test fixtures, the shipped datasets and the shared raw data live."""
from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
SWEEP_FIXTURES = FIXTURES / "sweeps"
KTT_FIXTURES = FIXTURES / "ktt"
GPA_FIXTURES = FIXTURES / "gpa"
DATASETS = REPO / "datasets"
TITANV_SWEEP = DATASETS / "titanv-seed004" / "sweep.csv"
RAW = (REPO / ".." / "shared" / "data" / "raw").resolve()
needs_raw = pytest.mark.skipif(
    not RAW.is_dir(), reason=f"shared raw data not found at {RAW} (../shared/data/raw from the repo root); "
                             "full-file checks run where it is present (CI has it)")


def raw(*parts: str) -> Path:
    """A file under ../shared/data/raw, or skip the test with the reason."""
    path = RAW.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} not present (shared raw data is only available next to the checkout)")
    return path


def stem(name: str) -> str:
    """The spec stem a device name resolves to (so tests survive spec renames)."""
    from hybridperf.hardware import load_gpu

    return Path(load_gpu(name).path).stem


def edited_descriptor(folder: Path, kernel: str, old: str, new: str) -> Path:
    """A copy of shipped descriptor ``kernel`` in ``folder`` with ``old`` replaced by ``new`` (which must occur)."""
    from hybridperf.kernel import load_kernel

    text = Path(load_kernel(kernel).path).read_text()
    assert old in text, f"{kernel}'s descriptor has no {old!r}"
    path = folder / f"{kernel}-edited.toml"
    path.write_text(text.replace(old, new))
    return path
