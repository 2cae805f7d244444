"""Shared helpers for analytical result objects (named arrays -> table)."""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["Terms"]


class Terms:
    """Mixin for frozen result dataclasses whose fields are equal-length arrays."""

    __slots__ = ()

    def to_frame(self) -> pd.DataFrame:
        """All terms as a DataFrame, one row per input row."""
        cols: dict[str, Any] = {}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            v = getattr(self, f.name)
            cols[f.name] = np.atleast_1d(v)
        n = max(len(v) for v in cols.values())
        return pd.DataFrame({k: np.broadcast_to(v, (n,)) for k, v in cols.items()})

    def row(self, i: int = 0) -> dict[str, Any]:
        """One row's terms as plain Python scalars."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            v = np.atleast_1d(getattr(self, f.name))
            x = v[i] if v.shape[0] > 1 else v[0]
            out[f.name] = x.item() if hasattr(x, "item") else x
        return out
