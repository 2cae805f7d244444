"""The known name closest to a mistyped one, for "did you mean" hints."""
from __future__ import annotations

import difflib
import os
from collections.abc import Iterable

__all__ = ["closest_name"]

# A name whose parts after the prefix it shares with the typed text are this far apart is another name of
# the same family, not a typo of it (difflib's ratio of the two remainders): neusight-conv is no neusight-ln,
# though the shared 'neusight-' lifts the whole names' ratio to 0.83.
_REMAINDER_CUTOFF = 0.5


def _one_edit_apart(a: str, b: str) -> bool:
    """Whether ``b`` is ``a`` with at most one character dropped, added or changed."""
    if abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        return sum(x != y for x, y in zip(a, b)) <= 1
    short, long_ = (a, b) if len(a) < len(b) else (b, a)
    return any(long_[:i] + long_[i + 1:] == short for i in range(len(long_)))


def _remainders_close(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` still look alike once their common prefix is cut off: remainders one edit apart
    (a letter dropped, added or changed) or with a ratio of at least :data:`_REMAINDER_CUTOFF`."""
    n = len(os.path.commonprefix([a, b]))
    ra, rb = a[n:], b[n:]
    return _one_edit_apart(ra, rb) or difflib.SequenceMatcher(None, ra, rb).ratio() >= _REMAINDER_CUTOFF


def closest_name(text: str, names: Iterable[str], cutoff: float = 0.75) -> str | None:
    """The name of ``names`` closest to ``text`` with case ignored (an exact match but for case first), as
    ``names`` spells it; None when none is within ``cutoff`` (difflib's ratio) or the close ones differ from
    ``text`` in all but a shared prefix (see :func:`_remainders_close`)."""
    lower = {n.lower(): n for n in sorted(names)}
    key = text.lower()
    if key in lower:
        return lower[key]
    near = difflib.get_close_matches(key, list(lower), n=5, cutoff=cutoff)
    return next((lower[n] for n in near if _remainders_close(key, n)), None)
