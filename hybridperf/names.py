"""The known name closest to a mistyped one, for "did you mean" hints."""
from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["closest_name"]


def closest_name(text: str, names: Iterable[str], cutoff: float = 0.75) -> str | None:
    """The name of ``names`` closest to ``text`` with case ignored (an exact match but for case first), as
    ``names`` spells it; None when none is within ``cutoff`` (difflib's ratio)."""
    lower = {n.lower(): n for n in sorted(names)}
    near = difflib.get_close_matches(text.lower(), list(lower), n=1, cutoff=cutoff)
    return lower[near[0]] if near else None
