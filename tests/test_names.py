"""closest_name: a "did you mean" for typos, none for another name of the same family."""
from __future__ import annotations

import pytest

from hybridperf.names import closest_name

NEUSIGHT = ["neusight-add", "neusight-addu", "neusight-gemm", "neusight-ln", "neusight-softmax"]


@pytest.mark.parametrize(("typed", "names", "expect"), [
    ("matvc", ["matvec", "matadd"], "matvec"),          # a letter dropped
    ("MATVEC", ["matvec"], "matvec"),                   # case only
    ("neusight-ad", NEUSIGHT, "neusight-add"),          # a letter dropped at the end
    ("neusight-softmx", NEUSIGHT, "neusight-softmax"),
    ("rtxa5000", ["rtxa6000", "rtx3090"], "rtxa6000"),  # one digit off (the closest spec, GPU lookup's hint)
    ("BLOCKK", ["BLOCK", "TILE"], "BLOCK"),
])
def test_typos_find_their_name(typed: str, names: list[str], expect: str) -> None:
    assert closest_name(typed, names) == expect


@pytest.mark.parametrize("typed", ["neusight-conv", "neusight-pool", "zzqx"])
def test_a_family_prefix_alone_is_no_match(typed: str) -> None:
    """'neusight-conv' shares 'neusight-' with every NeuSight descriptor (difflib's ratio 0.75 with
    'neusight-ln'), and differs in everything else: no guess."""
    assert closest_name(typed, NEUSIGHT) is None
