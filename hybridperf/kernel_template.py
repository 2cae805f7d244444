"""A new kernel descriptor to fill in: the format's fields with comments, parameters taken from a sweep if given."""
from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd

from hybridperf.descriptor_file import parse_kernel_text
from hybridperf.errors import HybridperfError
from hybridperf.sweep import param_columns, param_name

__all__ = ["descriptor_template", "write_descriptor_template"]

_BLOCK = re.compile(r"(block_size|work_group_size|local_size|block_dim|threads?)_?([xyz])?$", re.IGNORECASE)
_TILE = re.compile(r"tile(_size)?_?[xyz]?$", re.IGNORECASE)
_MAX_VALUES = 64  # values listed per config parameter; more become a range (min, max) without a list

_HEAD = '''format_version = 1
name = "{name}"
description = "{description}"
source = "where the kernel comes from (repository, file, commit)"
# Every formula below is a placeholder that evaluates: replace it with what your kernel does per thread.
# The format, each field and its default: docs/kernel-descriptor-format.md; a worked example: docs/own-kernel.md.
# Check it against your runs: hybridperf kernels check THIS_FILE --data runs.parquet
'''


def _number(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(float(v))


def _size_lines(data: pd.DataFrame | None) -> list[str]:
    if data is None:
        return ['N = { default = 1048576, min = 1, description = "problem size (elements)" }']
    out = []
    for col in param_columns(data, "size."):
        v = pd.to_numeric(data[col], errors="coerce").dropna()
        default = _number(v.max()) if len(v) else "1"
        low = 1 if len(v) and v.min() >= 1 else 0
        out.append(f'{param_name(col)} = {{ default = {default}, min = {low}, description = "" }}')
    return out or ['N = { default = 1048576, min = 1, description = "problem size (elements)" }']


def _config_lines(data: pd.DataFrame | None) -> tuple[list[str], list[str]]:
    """The [config] lines and the comments about parameters left out (text-valued)."""
    if data is None:
        return ['BLOCK = { values = [32, 64, 128, 256, 512, 1024], default = 256, '
                'description = "threads per block" }'], []
    lines, skipped = [], []
    for col in param_columns(data, "config."):
        name = param_name(col)
        v = pd.to_numeric(data[col], errors="coerce")
        if v.isna().all() and data[col].notna().any():
            skipped.append(f"# {name}: text values in the data; descriptors take numbers (booleans as 0/1)")
            continue
        vals = np.unique(v.dropna().to_numpy(dtype=np.float64))
        if len(vals) == 0:
            continue
        common = v.mode().iloc[0]
        if len(vals) <= _MAX_VALUES:
            listed = ", ".join(_number(x) for x in vals)
            lines.append(f'{name} = {{ values = [{listed}], default = {_number(common)}, description = "" }}')
        else:
            lines.append(f'{name} = {{ min = {_number(vals[0])}, max = {_number(vals[-1])}, '
                         f'default = {_number(common)}, description = "" }}')
    return lines, skipped


def _launch(sizes: list[str], config: list[str]) -> tuple[str, str]:
    """Threads per block (the product of config parameters named like block sizes) and blocks (one thread
    per element of the product of the sizes, times the product of tile parameters per thread)."""
    names = [line.split(" ", 1)[0] for line in config]
    block = [n for n in names if _BLOCK.match(n)] or []
    tile = [n for n in names if _TILE.match(n)]
    threads = " * ".join(block) or "256"
    work = " * ".join(line.split(" ", 1)[0] for line in sizes)
    per_thread = f"({threads}{''.join(f' * {t}' for t in tile)})"
    return threads, f"ceil({work} / {per_thread})"


def descriptor_template(name: str, data: pd.DataFrame | None = None, description: str = "") -> str:
    """TOML text of a new descriptor named ``name`` that parses and evaluates: sizes and config parameters
    from ``data`` (a sweep: size.* columns become sizes with their largest value as default, config.*
    columns config parameters with the values recorded and the commonest as default), else one size N
    and one BLOCK; launch and count formulas are placeholders to replace, each commented."""
    from hybridperf.descriptor_file import check_name

    check_name(name, "kernels new")
    sizes = _size_lines(data)
    config, skipped = _config_lines(data)
    threads, blocks = _launch(sizes, config)
    text = "\n".join([
        _HEAD.format(name=name, description=description or f"{name}: what one launch computes").rstrip(),
        "", "[sizes]                                 # the problem: what the user of the kernel chooses", *sizes,
        "", "[config]                                # the tuning knobs and the values tried", *config, *skipped,
        "", "[space]", "constraints = []                        # e.g. \"block_size_x * block_size_y <= 1024\"",
        "", "[launch]",
        f'threads_per_block = "{threads}"',
        f'blocks = "{blocks}"',
        'registers_per_thread = "32"             # from the compiler (-Xptxas -v) or the profiler',
        'smem_per_block_bytes = "0"              # shared memory per block, bytes',
        "", "[counts]                                # per thread, dynamic",
        'comp_insts = "20"                       # every non-global-memory instruction (ALU, shared, sync, branch)',
        'coal_mem_insts = "2"                    # coalesced global loads and stores',
        'uncoal_mem_insts = "0"                  # uncoalesced global loads and stores',
        '# fp_insts = "..."   flops = "..."   smem_insts = "..."   sync_insts = "..."   (see the format doc)',
        '# local_bytes_per_thread = "..."   local_traffic_bytes = "..."   (a per-thread array indexed at run time)',
        'dram_bytes = "4 * 2 * threads_per_block * blocks"   # bytes the whole launch moves to and from DRAM',
        "",
    ])
    try:
        desc = parse_kernel_text(text, "the template")
        if all(p.default is not None for p in desc.sizes + desc.config):
            desc.profile({})
    except HybridperfError as exc:
        raise HybridperfError(f"cannot write a template for {name!r}: {exc}") from None
    if not math.isfinite(float(desc.space_size())):
        raise HybridperfError(f"template for {name!r}: the configuration space cannot be counted")
    return text


def write_descriptor_template(name: str, path: str | Path, data: pd.DataFrame | None = None, *,
                              force: bool = False) -> str:
    """Write :func:`descriptor_template` to ``path`` (atomically); an existing file is kept unless ``force``
    (a descriptor being edited is not replaced by a fresh template). Returns the text written."""
    from hybridperf.errors import OutputError
    from hybridperf.files import atomic_write_text

    if Path(path).exists() and not force:
        raise OutputError(f"{path} exists; pass --force to replace it with a new template, or choose another name")
    text = descriptor_template(name, data)
    atomic_write_text(path, text)
    return text
