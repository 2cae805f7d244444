"""closest_name: a "did you mean" for typos, none for another name of the same family."""
from __future__ import annotations

import pytest

from hybridperf.kernel import list_kernels
from hybridperf.names import closest_name

KERNELS = sorted({n for k in list_kernels() for n in (k.name, *k.aliases)})


@pytest.mark.parametrize(("typed", "names", "expect"), [
    ("matvc", ["matvec", "matadd"], "matvec"),          # a letter dropped
    ("MATVEC", ["matvec"], "matvec"),                   # case only
    ("neusight-ad", KERNELS, "neusight-add"),           # a letter dropped at the end
    ("neusight-softmx", KERNELS, "neusight-softmax"),
    ("neusight-tahn", KERNELS, "neusight-tanh"),        # two letters swapped
    ("rtxa5000", ["rtxa6000", "rtx3090"], "rtxa6000"),  # one digit off (the closest spec, GPU lookup's hint)
    ("teslat5", ["teslat4", "teslap4"], "teslat4"),
    ("BLOCKK", ["BLOCK", "TILE"], "BLOCK"),
])
def test_typos_find_their_name(typed: str, names: list[str], expect: str) -> None:
    assert closest_name(typed, names) == expect


@pytest.mark.parametrize("typed", ["neusight-conv", "neusight-pool", "neusight-sm", "neusight-log", "zzqx"])
def test_a_family_prefix_alone_is_no_match(typed: str) -> None:
    """'neusight-conv' shares 'neusight-' with every NeuSight descriptor (difflib's ratio 0.83 with
    'neusight-ln') and differs in everything else: no guess among the shipped kernel names."""
    assert closest_name(typed, KERNELS) is None
