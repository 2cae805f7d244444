"""Per-row checks of sweep rows against their descriptors and GPU specs: bad rows counted, grouped by reason."""
from __future__ import annotations

import warnings
from collections.abc import Collection, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from hybridperf.descriptor import KernelDescriptor, Param
from hybridperf.errors import HybridperfError
from hybridperf.hardware import load_gpu
from hybridperf.kernel import resolve_kernels
from hybridperf.sweep import param_columns, param_name

__all__ = ["RowCheck", "check_column_names", "check_rows", "drop_bad_rows", "drop_rows"]

_SHOWN_REASONS = 4


@dataclass(frozen=True, slots=True)
class RowCheck:
    """Which rows passed (``ok``, one bool per row) and why the others failed (``reasons``: '' for ok rows;
    the same text for every row failing the same way, with ``examples`` holding one offending value each)."""

    ok: np.ndarray
    reasons: np.ndarray
    examples: Mapping[str, str]

    @property
    def n_bad(self) -> int:
        return int((~self.ok).sum())

    def summary(self, what: str = "rows") -> str:
        """One line: how many rows failed of how many, and the commonest reasons with their counts."""
        counts = pd.Series(self.reasons[~self.ok]).value_counts()
        shown = counts.head(_SHOWN_REASONS).items()
        parts = [f"{n:,} x {reason}{self.examples.get(reason, '')}" for reason, n in shown]
        more = f"; {len(counts) - _SHOWN_REASONS} more reasons" if len(counts) > _SHOWN_REASONS else ""
        return f"{self.n_bad:,} of {len(self.ok):,} {what} are invalid: {'; '.join(parts)}{more}"


# A row's reason per rule of Param.broken (formatted with the parameter's name and Param).
_ROW_REASONS = {"finite": "{name} is not a finite number", "min": "{name} is below its minimum {p.min:.15g}",
                "max": "{name} is above its maximum {p.max:.15g}", "integer": "{name} is not a whole number",
                "values": "{name} is not an allowed value"}


def _param_problems(name: str, p: Param, raw: pd.Series, present: bool, size: bool
                    ) -> list[tuple[np.ndarray, str, np.ndarray]]:
    """(bad mask, reason, values) for one parameter's column ``raw`` (all empty where not ``present``). A cell
    that is text, not a number, is refused; an empty one takes the parameter's default, except a size's (the
    column says the rows give their problem size, and a default would stand in for it unsaid)."""
    v = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=np.float64)
    missing = np.isnan(v)
    out = [(missing & raw.notna().to_numpy(), f"{name} is not a number", v)]
    if p.default is None or (size and present):
        why = "no default" if p.default is None else "a size is never taken from the descriptor's default"
        out.append((missing, f"{name} is {'empty' if present else 'missing'} ({why})", v))
    v = np.where(missing, p.default if p.default is not None else np.nan, v)
    given = ~np.isnan(v)
    out.extend((given & mask, _ROW_REASONS[rule].format(name=name, p=p), v) for mask, rule in p.broken(v))
    return out


def _kernel_rows(desc: KernelDescriptor, rows: pd.DataFrame, bad: np.ndarray, reasons: np.ndarray,
                 examples: dict[str, str]) -> None:
    """Mark the rows (``rows`` all of one kernel; ``bad``/``reasons`` aligned with it) whose parameters break
    the descriptor's bounds or allowed values. Parameters come from size.*/config.* (and counter.*)
    columns, as the features read them."""
    cols: dict[str, str] = {}
    for c in [*param_columns(rows), *param_columns(rows, "counter.")]:  # the order the features read them in
        cols.setdefault(param_name(c), c)
    for name, p in desc.parameters.items():
        col = cols.get(name)
        raw = rows[col] if col is not None else pd.Series(np.nan, index=rows.index)
        # A column no row of this kernel fills is absent for it: sweeps merged from sources that did not record
        # a size (a Kernel Tuner cache) beside one that did leave it empty in the first's rows.
        present = col is not None and bool(raw.notna().any())
        for mask, reason, values in _param_problems(name, p, raw, present, name in desc.size_names):
            new = mask & ~bad
            if new.any():
                reason = f"{desc.name}: {reason}"
                reasons[new] = reason
                bad |= new
                if reason not in examples and np.isfinite(values[new][0]):
                    examples[reason] = f" (e.g. {values[new][0]:.15g})"


def check_rows(rows: pd.DataFrame, kernels: Mapping[str, KernelDescriptor] | None = None, *,
               names: bool = True) -> RowCheck:
    """Check every row: its kernel has a descriptor (``kernels`` first, then the lookup), its GPU a spec,
    and each parameter of the descriptor is given or has a default, within its bounds and, for a
    parameter with a values list, one of them. Vectorised per kernel. ``names=False`` checks only the
    parameters of the kernels that have a descriptor (an importer checks names its own way)."""
    n = len(rows)
    bad, reasons, examples = np.zeros(n, dtype=bool), np.full(n, "", dtype=object), {}
    # factorize hashes the names (np.unique sorts every row's string: 8 % of predict_rows on 200k rows)
    kernel_codes, kernel_names = pd.factorize(rows["kernel"].astype(str).to_numpy(), sort=True)
    for code, name in enumerate(kernel_names):
        idx = np.flatnonzero(kernel_codes == code)
        try:
            desc = resolve_kernels([name], kernels)[name]
        except HybridperfError:
            if names:
                bad[idx], reasons[idx] = True, (f"unknown kernel {name!r} (no descriptor: name its .toml file or add "
                                                "its folder to $HYBRIDPERF_KERNEL_PATH)")
            continue
        sub_bad, sub_reasons = np.zeros(len(idx), dtype=bool), np.full(len(idx), "", dtype=object)
        _kernel_rows(desc, rows.iloc[idx], sub_bad, sub_reasons, examples)
        bad[idx], reasons[idx] = sub_bad, sub_reasons
    gpus = rows["gpu"].astype(str).to_numpy()
    missing = []
    reason = ("runs on a GPU without a spec (to include them, write one, docs/gpu-spec-format.md, and put its "
              "folder on $HYBRIDPERF_GPU_PATH)")
    for gpu in np.sort(pd.unique(gpus)) if names else ():
        try:
            load_gpu(gpu)
        except HybridperfError:
            m = (gpus == gpu) & ~bad
            bad[m], reasons[m] = True, reason
            missing.append(gpu)
    if missing:
        examples[reason] = f" ({', '.join(missing[:4])}{f', ... {len(missing)} GPUs' if len(missing) > 4 else ''})"
    return RowCheck(ok=~bad, reasons=reasons, examples=examples)


def check_column_names(rows: pd.DataFrame, kernels: Mapping[str, KernelDescriptor], *,
                       exempt: Collection[str] = (), what: str = "rows") -> None:
    """A HybridperfError for a parameter column no kernel of ``kernels`` has but named like one (``config.BLOK``,
    ``config.block``: a typo or a case slip, which would leave the parameter at its default unsaid), or a
    parameter's column without its ``size.`` / ``config.`` prefix (where the prefixed one is absent). Columns no
    descriptor reads and named like none stay (data such as NeuSight's config.op), as do those in ``exempt``."""
    from hybridperf.names import closest_name

    known = {n for d in kernels.values() for n in d.parameters}
    for col in param_columns(rows):
        name = param_name(col)
        # an empty column is left from other rows (a recording filtered to some of its kernels keeps size.ITERS)
        if name in known or col in exempt or not rows[col].notna().any():
            continue
        near = closest_name(name, known)
        if near:
            raise HybridperfError(f"{what}: column {col!r} is no parameter of {', '.join(sorted(kernels))} "
                                  f"(did you mean {col.split('.')[0]}.{near}?); rename it")
    for col in rows.columns:
        for d in kernels.values():
            if col in d.parameters and f"size.{col}" not in rows.columns and f"config.{col}" not in rows.columns:
                prefix = "size." if col in d.size_names else "config."
                raise HybridperfError(f"{what}: column {col!r} needs its prefix: {prefix}{col} "
                                      f"({d.name}'s {'size' if prefix == 'size.' else 'configuration'} parameter)")


def drop_bad_rows(rows: pd.DataFrame, kernels: Mapping[str, KernelDescriptor] | None = None, *,
                  strict: bool = False, what: str = "rows", names: bool = True) -> pd.DataFrame:
    """``rows`` without the rows :func:`check_rows` refuses: a warning counts them and groups the reasons, or,
    with ``strict``, a HybridperfError does; an error too when no row is left."""
    return drop_rows(rows, check_rows(rows, kernels, names=names), strict=strict, what=what)


def drop_rows(rows: pd.DataFrame, check: RowCheck, *, strict: bool = False, what: str = "rows") -> pd.DataFrame:
    """``rows`` without the rows ``check`` failed, announced as :func:`drop_bad_rows` does."""
    if check.n_bad == 0:
        return rows
    line = check.summary(what)
    if strict or check.n_bad == len(rows):
        raise HybridperfError(line + ("" if strict else "; nothing left to use"))
    warnings.warn(f"{line}; skipped them (pass --strict to stop instead)", UserWarning, stacklevel=3)
    return rows.loc[check.ok]
