"""The known name closest to a mistyped one, for "did you mean" hints."""
from __future__ import annotations

import difflib
import os
from collections.abc import Iterable

__all__ = ["closest_name"]

# A name whose parts after the prefix it shares with the typed text are this far apart is another name of
# the same family, not a typo of it (difflib's ratio of the two remainders): neusight-conv is no neusight-ln,
# though the shared 'neusight-' lifts the whole names' ratio to 0.75.
_REMAINDER_CUTOFF = 0.5


def _remainders_close(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` still look alike once their common prefix is cut off: remainders of at most two
    characters (a letter dropped or added at the end) or a remainder ratio of at least :data:`_REMAINDER_CUTOFF`."""
    n = len(os.path.commonprefix([a, b]))
    ra, rb = a[n:], b[n:]
    return max(len(ra), len(rb)) <= 2 or difflib.SequenceMatcher(None, ra, rb).ratio() >= _REMAINDER_CUTOFF


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
