"""A rank request checked against its descriptor: sizes, space overrides and explicit configurations."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from hybridperf.errors import DescriptorError, HybridperfError
from hybridperf.kernel import KernelDescriptor
from hybridperf.sweep import param_name

__all__ = ["check_overrides", "explicit_configs", "problem_sizes"]


def check_overrides(kernel: KernelDescriptor, overrides: Mapping[str, Sequence[float]]) -> None:
    """A DescriptorError where ``overrides`` name an unknown parameter, no values, or values outside
    the descriptor's lists (features are rebuilt from the shipped descriptor, which rejects them)."""
    params = {p.name: p for p in kernel.config}
    for name, vals in overrides.items():
        p = params.get(name)
        if p is None:
            raise DescriptorError(f"{kernel.name}: --space names unknown config parameter {name!r}; "
                                  f"config parameters: {', '.join(params)}")
        if p.values is not None:
            bad = [v for v in vals if float(v) not in p.values]
            if bad:
                raise DescriptorError(f"{kernel.name}: --space {name}={bad[0]:g} is not among the descriptor's values "
                                      f"({', '.join(f'{v:g}' for v in p.values)}); restrict to a subset or edit the "
                                      "descriptor")
        if not vals:
            raise DescriptorError(f"{kernel.name}: --space {name} has no values; give at least one")


def problem_sizes(kernel: KernelDescriptor, sizes: Mapping[str, Any]) -> dict[str, float]:
    """One value per size parameter: the given ones (one each, within bounds), defaults for the rest."""
    out: dict[str, float] = {}
    names = set(kernel.size_names)
    for name, v in sizes.items():
        if name not in names:
            what = "a config parameter (use space_overrides / --space)" if name in kernel.config_names else "unknown"
            raise DescriptorError(f"{kernel.name}: size {name!r} is {what}; sizes: {', '.join(kernel.size_names)}")
        arr = np.atleast_1d(np.asarray(v, dtype=np.float64))
        if arr.size != 1:
            raise HybridperfError(f"{kernel.name}: rank one problem size at a time; {name} has {arr.size} values")
        out[name] = float(arr[0])
    # Fill size defaults and check bounds; config values are pinned so an overridden default can't fail.
    resolved = kernel.resolve({**out, **{p.name: p.values[0] for p in kernel.config if p.values}})
    return {n: float(np.asarray(resolved[n])) for n in kernel.size_names}


def explicit_configs(kernel: KernelDescriptor, configs: pd.DataFrame) -> pd.DataFrame:
    """One column per config parameter: ``config.*`` columns (a sweep table) or columns named after
    the parameters; a missing parameter or an empty cell takes the descriptor's default."""
    prefixed = [c for c in configs.columns if str(c).startswith("config.")]
    table = configs[prefixed].set_axis([param_name(c) for c in prefixed], axis=1) if prefixed else configs
    unknown = [c for c in prefixed if param_name(c) not in kernel.config_names]
    if unknown:
        raise DescriptorError(f"{kernel.name}: configs column {unknown[0]!r} is not a config parameter; "
                              f"config parameters: {', '.join(kernel.config_names)}")
    if table.empty:
        raise HybridperfError("configs has no rows; give at least one configuration to rank")
    out = pd.DataFrame(index=pd.RangeIndex(len(table)))
    for p in kernel.config:
        col = (pd.to_numeric(table[p.name], errors="coerce").to_numpy(dtype=np.float64) if p.name in table
               else np.full(len(table), np.nan))
        if np.isnan(col).any():
            if p.default is None:
                raise DescriptorError(f"{kernel.name}: configs lack a value of {p.name} in "
                                      f"{int(np.isnan(col).sum())} rows and it has no default; fill the column")
            col = np.where(np.isnan(col), p.default, col)
        out[p.name] = col
    return out
