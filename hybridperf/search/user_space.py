"""The space a user means to search: the descriptor's constraints with the user's fixes, or a file's configurations."""
# One function, :func:`user_space`, turns what ``rank`` and ``suggest`` are given (``--set``,
# ``--space``, ``--candidates``) into that space, so both commands search the same configurations.
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from hybridperf.errors import DescriptorError, HybridperfError
from hybridperf.kernel import KernelDescriptor, kernel_key, load_kernel
from hybridperf.search.space import ConfigSpace
from hybridperf.sweep import launch_rows, param_name

__all__ = ["UserSpace", "user_space"]


@dataclass(frozen=True, slots=True)
class UserSpace:
    """What to search for one problem size.

    ``kernel`` is the descriptor with its config values narrowed to the user's fixes and
    restrictions; ``sizes`` every size parameter's value; ``fixed`` the config parameters that take
    one value only (fixed by ``--set``, ``--space``, the descriptor or every candidate), which are
    therefore not searched. Exactly one of ``space`` (the descriptor's constrained space, built
    by the solver) and ``candidates`` (explicit configurations: an ``index`` column, the row of
    the table they came from, and one column per config parameter) is set. ``defaulted`` names the sizes
    neither the values nor the candidates gave: the descriptor's defaults stand in for them.
    """

    kernel: KernelDescriptor
    sizes: Mapping[str, float]
    fixed: Mapping[str, float]
    space: ConfigSpace | None = None
    candidates: pd.DataFrame | None = None
    defaulted: tuple[str, ...] = ()

    def size(self) -> int:
        """Configurations to consider (before constraints, for the descriptor's space)."""
        return self.space.size() if self.space is not None else len(self.candidates)  # type: ignore[arg-type]

    def configs(self, max_rows: int | None = None) -> pd.DataFrame:
        """Every feasible configuration (solver) or every candidate: ``index`` and one column per parameter."""
        if self.candidates is not None:
            return self.candidates
        assert self.space is not None
        return self.space.frame(max_rows)

    def rows(self, kernel_key: str, gpu_key: str, max_rows: int | None = None) -> pd.DataFrame:
        """The configurations as sweep rows (kernel, gpu, size.*, config.*) for one problem size."""
        cfg = self.configs(max_rows)
        names = list(self.kernel.config_names)
        params = pd.DataFrame({n: np.full(len(cfg), v) for n, v in self.sizes.items()})
        params[names] = cfg[names].to_numpy(dtype=np.float64)
        return launch_rows(kernel_key, gpu_key, params, self.kernel.size_names, names)


def _check_values(kernel: KernelDescriptor, name: str, vals: Sequence[float], flag: str) -> None:
    params = {p.name: p for p in kernel.config}
    p = params.get(name)
    if p is None:
        raise DescriptorError(f"{kernel.name}: {flag} names unknown config parameter {name!r}; "
                              f"config parameters: {', '.join(params)}")
    if not len(vals):
        raise DescriptorError(f"{kernel.name}: {flag} {name} has no values; give at least one")
    if p.values is not None:
        # Features are rebuilt from the descriptor, which rejects values outside its lists.
        bad = [v for v in vals if float(v) not in p.values]
        if bad:
            raise DescriptorError(f"{kernel.name}: {flag} {name}={bad[0]:g} is not among the descriptor's values "
                                  f"({', '.join(f'{v:g}' for v in p.values)}); pick from them or edit the descriptor")


def _split(kernel: KernelDescriptor, values: Mapping[str, Any]) -> tuple[dict[str, float], dict[str, float]]:
    """``values`` -> (sizes, config fixes); one value each."""
    sizes: dict[str, float] = {}
    fixes: dict[str, float] = {}
    for name, v in values.items():
        if name not in kernel.size_names and name not in kernel.config_names:
            raise DescriptorError(f"{kernel.name}: unknown parameter {name!r}; sizes: {', '.join(kernel.size_names)}; "
                                  f"config: {', '.join(kernel.config_names)}")
        arr = np.atleast_1d(np.asarray(v, dtype=np.float64))
        if arr.size != 1:
            raise HybridperfError(f"{kernel.name}: rank one problem size at a time; {name} has {arr.size} values "
                                  "(restrict a config parameter to several values with --space instead)")
        (sizes if name in kernel.size_names else fixes)[name] = float(arr[0])
    return sizes, fixes


def _sizes(kernel: KernelDescriptor, sizes: Mapping[str, float]) -> dict[str, float]:
    """Every size: the given ones, defaults for the rest; bounds checked (config values pinned to allowed ones)."""
    resolved = kernel.resolve({**sizes, **{p.name: p.values[0] for p in kernel.config if p.values}})
    return {n: float(np.asarray(resolved[n])) for n in kernel.size_names}


def _kernel_rows(kernel: KernelDescriptor, table: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``table`` that belong to ``kernel`` (all of them without a kernel column)."""
    if "kernel" not in table.columns:
        return table
    names = table["kernel"].astype(str)

    def same(name: str) -> bool:
        if name in (kernel.name, kernel_key(kernel), *kernel.aliases):
            return True
        try:
            return load_kernel(name).name == kernel.name
        except HybridperfError:
            return False

    mine = {n for n in names.unique() if same(n)}
    if not mine:
        raise HybridperfError(f"the candidates hold no rows of kernel {kernel.name} (kernels: "
                              f"{', '.join(sorted(names.unique())[:5])}); pass the matching --kernel")
    return table.loc[names.isin(mine)]


def _candidate_sizes(kernel: KernelDescriptor, table: pd.DataFrame,
                     given: Mapping[str, float]) -> tuple[pd.DataFrame, dict[str, float]]:
    """Keep the rows of the given sizes; a size not given takes the value the rows hold (one only)."""
    sizes = dict(given)
    for name in kernel.size_names:
        col = f"size.{name}"
        if col not in table.columns:
            continue
        v = pd.to_numeric(table[col], errors="coerce")
        if name in given:
            table, v = table.loc[v.isna() | (v == given[name])], v[v.isna() | (v == given[name])]
            if table.empty:
                raise HybridperfError(f"the candidates hold no rows with {name}={given[name]:g}; "
                                      "pick a size they hold with --set")
            continue
        held = v.dropna().unique()
        if len(held) > 1:
            shown = ", ".join(f"{x:g}" for x in sorted(held)[:6])
            raise HybridperfError(f"the candidates hold {len(held)} values of {name} ({shown}); choose one with "
                                  f"--set {name}=...")
        if len(held) == 1:
            sizes[name] = float(held[0])
    return table, sizes


def _explicit(kernel: KernelDescriptor, table: pd.DataFrame) -> pd.DataFrame:
    """One column per config parameter from ``config.*`` columns (a sweep) or bare names; a missing
    parameter or empty cell takes the descriptor's default. ``index``: the row in ``table``. A ``config.*``
    column of no parameter of the kernel is refused where it holds a value, and ignored where it is empty (a
    sweep of several kernels holds each one's parameters, empty in the other kernels' rows)."""
    prefixed = [c for c in table.columns if str(c).startswith("config.")
                and (param_name(c) in kernel.config_names or table[c].notna().any())]
    unknown = [c for c in prefixed if param_name(c) not in kernel.config_names]
    if unknown:
        raise DescriptorError(f"{kernel.name}: candidates column {unknown[0]!r} is not a config parameter; "
                              f"config parameters: {', '.join(kernel.config_names)}")
    if not prefixed:
        _check_bare_names(kernel, table)
    named = table[prefixed].set_axis([param_name(c) for c in prefixed], axis=1) if prefixed else table
    out = pd.DataFrame({"index": np.arange(len(table), dtype=np.int64)})
    for p in kernel.config:
        col = (pd.to_numeric(named[p.name], errors="coerce").to_numpy(dtype=np.float64) if p.name in named
               else np.full(len(table), np.nan))
        text = np.isnan(col) & named[p.name].notna().to_numpy() if p.name in named else np.zeros(len(col), bool)
        if text.any():
            raise DescriptorError(f"{kernel.name}: the candidates' {p.name} holds {named[p.name][text].iloc[0]!r} "
                                  f"in {int(text.sum())} rows, not a number; fix the column")
        if np.isnan(col).any():
            if p.default is None:
                raise DescriptorError(f"{kernel.name}: the candidates lack a value of {p.name} in "
                                      f"{int(np.isnan(col).sum())} rows and it has no default; fill the column")
            col = np.where(np.isnan(col), p.default, col)
        out[p.name] = col
    return out


def _check_bare_names(kernel: KernelDescriptor, table: pd.DataFrame) -> None:
    """A DescriptorError where candidates named by bare parameter names name none of the kernel's config parameters
    (every row would be the default configuration), or name one like a parameter but not it (``BLOK``)."""
    from hybridperf.names import closest_name

    names = {str(c) for c in table.columns}
    for col in sorted(names - set(kernel.parameters)):
        near = closest_name(col, kernel.config_names)
        if near:
            raise DescriptorError(f"{kernel.name}: candidates column {col!r} is no parameter (did you mean "
                                  f"{near}?); rename it")
    if kernel.config_names and not names & set(kernel.config_names):
        raise DescriptorError(f"{kernel.name}: the candidates name no config parameter (columns: "
                              f"{', '.join(sorted(names)[:6])}); name them config.<parameter> or after the "
                              f"parameters: {', '.join(kernel.config_names)}")


def _candidates(kernel: KernelDescriptor, table: Any, given: Mapping[str, float],
                allowed: Mapping[str, Sequence[float]]) -> tuple[pd.DataFrame, dict[str, float]]:
    if isinstance(table, Mapping) and not any(isinstance(v, (list, tuple, np.ndarray, pd.Series))
                                              for v in table.values()):
        table = [table]  # one configuration: {'BLOCK': 64}
    if isinstance(table, (Mapping, list)):  # {'BLOCK': [64, 128]} or a list of {'BLOCK': 64} records
        try:
            table = pd.DataFrame(table)
        except ValueError as exc:  # lists of different lengths
            raise HybridperfError(f"the candidates do not make a table ({exc}); give lists of one length") from None
    if not isinstance(table, pd.DataFrame):
        raise HybridperfError(f"the candidates must be a pandas DataFrame of configurations, got "
                              f"{type(table).__name__}")
    if table.empty:
        raise HybridperfError("the candidates have no rows; give at least one configuration")
    table = table.reset_index(drop=True)
    rows = _kernel_rows(kernel, table)
    rows, sizes = _candidate_sizes(kernel, rows, given)
    cfg = _explicit(kernel, rows)
    cfg["index"] = rows.index.to_numpy(dtype=np.int64)  # the row of the candidates table
    for name, vals in allowed.items():
        cfg = cfg.loc[np.isin(cfg[name].to_numpy(), np.asarray(vals, dtype=np.float64))]
    if cfg.empty:
        fixed = ", ".join(f"{k}={'/'.join(f'{x:g}' for x in v)}" for k, v in allowed.items())
        raise HybridperfError(f"no candidate has {fixed}; drop the --set/--space restriction or pick other values")
    cfg = cfg.drop_duplicates(subset=list(kernel.config_names), keep="first").reset_index(drop=True)
    return cfg, sizes


def _values(name: str, values: Any) -> tuple[float, ...]:
    """A restriction's values (one value or a list of them) as floats, or a HybridperfError naming the parameter."""
    try:
        arr = np.atleast_1d(np.asarray(values, dtype=np.float64))
    except (TypeError, ValueError):
        raise HybridperfError(f"the values allowed for {name} must be numbers (e.g. {name}=[64, 128]), got "
                              f"{values!r}") from None
    if arr.ndim != 1 or not len(arr):
        raise HybridperfError(f"the values allowed for {name} must be a flat, non-empty list, got {values!r}")
    return tuple(dict.fromkeys(float(x) for x in arr))  # a value given twice is one value (not ranked twice)


def user_space(kernel: KernelDescriptor | str, values: Mapping[str, Any] | None = None, *,
               restrict: Mapping[str, Sequence[float]] | None = None,
               candidates: pd.DataFrame | None = None) -> UserSpace:
    """The space to search for one problem size.

    Parameters
    ----------
    kernel : descriptor, or a shipped name or TOML path.
    values : parameter -> one value (``--set``): sizes (defaults fill the rest) and config
        parameters, which are then fixed, not searched.
    restrict : config parameter -> allowed values (``--space``), a subset of the descriptor's.
    candidates : explicit configurations (``--candidates``): ``config.*`` columns, as in a sweep
        (rows of other kernels are left out; a size the rows hold one value of is taken as the
        problem size; rows of other sizes are left out), or columns named after the parameters.
        Duplicate configurations (e.g. the same configuration on several GPUs) count once; fixes
        and restrictions keep the candidates that match them.

    Returns
    -------
    UserSpace
        Without candidates: the descriptor's space with the fixes and restrictions, every
        ``[space]`` constraint applied by the solver (:class:`ConfigSpace`).
    """
    desc = load_kernel(kernel)
    given, fixes = _split(desc, values or {})
    restrict = {k: _values(k, v) for k, v in (restrict or {}).items()}
    both = sorted(set(fixes) & set(restrict))
    if both:
        raise HybridperfError(f"{both[0]} is both fixed (--set) and restricted (--space); give one")
    allowed = {**restrict, **{k: (v,) for k, v in fixes.items()}}
    for name, vals in allowed.items():
        _check_values(desc, name, vals, "--set" if name in fixes else "--space")
    if candidates is not None:
        cfg, sizes = _candidates(desc, candidates, given, allowed)
        narrowed = desc.with_space(allowed) if allowed else desc
        constant = {n: float(cfg[n].iloc[0]) for n in desc.config_names if cfg[n].nunique() == 1}
        return UserSpace(kernel=narrowed, sizes=_sizes(narrowed, sizes), fixed=constant, candidates=cfg,
                         defaulted=tuple(n for n in desc.size_names if n not in sizes))
    narrowed = desc.with_space(allowed) if allowed else desc
    free = [p.name for p in narrowed.config if p.values is None]
    if free:
        raise DescriptorError(f"{desc.name}: config parameter(s) {', '.join(free)} have no 'values' list, so the "
                              f"space cannot be enumerated; add values = [...] or pass --space {free[0]}=v1,v2")
    sizes = _sizes(narrowed, given)
    space = ConfigSpace(names=narrowed.config_names, values=tuple(tuple(p.values) for p in narrowed.config),
                        constraints=narrowed.constraints, constants=sizes)
    fixed = {p.name: float(p.values[0]) for p in narrowed.config if len(p.values) == 1}  # type: ignore[arg-type]
    return UserSpace(kernel=narrowed, sizes=sizes, fixed=fixed, space=space,
                     defaulted=tuple(n for n in desc.size_names if n not in given))
