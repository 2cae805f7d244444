"""The user's space: fixes (--set) are not searched, --space restricts, --candidates ranks exactly a file's
configurations; rank and suggest get theirs from the same function."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hybridperf.datasets import load_dataset
from hybridperf.errors import DescriptorError, HybridperfError
from hybridperf.search.measure_next import space_candidates
from hybridperf.search.rank import rank_configs
from hybridperf.search.user_space import user_space

from .conftest import DESCRIPTOR, GPU, SIZES, SMALL


def test_a_fixed_config_parameter_is_not_searched() -> None:
    res = rank_configs(None, DESCRIPTOR, GPU, {**SIZES, "BX": 16}, space_overrides={k: v for k, v in SMALL.items()
                                                                                     if k != "BX"}, prune="ryoo")
    assert res.fixed["BX"] == 16 and (res.candidates["config.BX"] == 16).all()
    full = rank_configs(None, DESCRIPTOR, GPU, SIZES, space_overrides=SMALL, prune="ryoo")
    assert res.space_size == full.space_size // 4  # BX had 4 values
    assert res.n_feasible + res.n_infeasible == res.space_size


def test_kernel_tuner_convolution_keeps_the_filter_the_user_fixed() -> None:
    # The issue: picks came back with another filter size. Fixed, the filter is no longer searched.
    us = user_space("kt-convolution", {"W": 4096, "H": 4096, "filter_width": 15, "filter_height": 15},
                    restrict={"block_size_x": [32, 64], "block_size_y": [2, 4], "tile_size_x": [1, 2]})
    cfg = us.configs()
    assert (cfg["filter_width"] == 15).all() and (cfg["filter_height"] == 15).all()
    assert us.fixed["filter_width"] == 15 and us.sizes == {"W": 4096.0, "H": 4096.0}
    assert us.space.size() == 2 * 2 * 2 * 8 * 2 * 2 * 2 * 2  # the filters count once


def test_candidates_are_exactly_the_recorded_configurations() -> None:
    sweep = load_dataset("kt-convolution")  # 5 GPUs, one size, partly overlapping configurations
    cols = [c for c in sweep.columns if c.startswith("config.")]
    us = user_space("kt-convolution", {}, candidates=sweep)
    assert us.sizes == {"W": 4096.0, "H": 4096.0}  # taken from the rows
    distinct = sweep[cols].fillna({"config.use_shmem": 1, "config.use_cmem": 1}).drop_duplicates()
    assert len(us.candidates) == len(distinct)
    assert (us.candidates["filter_width"] == 15).all() and us.fixed["filter_width"] == 15
    # index: the row of the table each configuration first came from
    first = sweep.iloc[us.candidates["index"].to_numpy()]
    np.testing.assert_array_equal(first["config.block_size_x"].to_numpy(), us.candidates["block_size_x"].to_numpy())
    # A fix keeps the matching candidates.
    fixed = user_space("kt-convolution", {"block_size_x": 32}, candidates=sweep)
    assert (fixed.candidates["block_size_x"] == 32).all() and 0 < len(fixed.candidates) < len(us.candidates)


def test_candidates_of_several_sizes_or_kernels() -> None:
    rows = pd.DataFrame({"kernel": ["kt-convolution"] * 3 + ["clblast-xgemm"], "gpu": "rtx-a4000",
                         "size.W": [4096, 4096, 2048, np.nan], "size.H": 4096, "config.block_size_x": [16, 32, 64, 8]})
    with pytest.raises(HybridperfError, match="2 values of W .*--set W="):
        user_space("kt-convolution", {}, candidates=rows)
    us = user_space("kt-convolution", {"W": 2048}, candidates=rows)
    assert us.candidates["block_size_x"].tolist() == [64] and us.candidates["index"].tolist() == [2]
    with pytest.raises(HybridperfError, match="no rows with W=1024"):
        user_space("kt-convolution", {"W": 1024}, candidates=rows)
    with pytest.raises(HybridperfError, match="no rows of kernel kt-dedispersion"):
        user_space("kt-dedispersion", {}, candidates=rows)


def test_candidates_from_a_recorded_sweep_of_several_kernels() -> None:
    # The shipped H200 recording holds eight kernels, each one's config.* columns empty in the others' rows: the
    # reduction's candidates are its 210 recorded configurations at one N (a column of another kernel's parameter is
    # ignored where empty, refused where it holds a value).
    sweep = load_dataset("h200-cuda-bench")
    n = 2.0**24
    us = user_space("bench-reduction", {"N": n}, candidates=sweep)
    mine = sweep[(sweep["kernel"] == "bench-reduction") & (sweep["size.N"] == n)]
    cols = [c for c in mine.columns if c.startswith("config.") and mine[c].notna().any()]
    assert len(us.candidates) == len(mine[cols].drop_duplicates()) == 210
    with pytest.raises(DescriptorError, match="candidates column 'config.TILE' is not a config parameter"):
        user_space("bench-reduction", {"N": n}, candidates=mine.assign(**{"config.TILE": 16.0}))


def test_rank_and_suggest_search_the_same_space(small_sweep) -> None:
    kw = {"space_overrides": {k: v for k, v in SMALL.items() if k != "PAD"}}
    ranked = rank_configs(None, DESCRIPTOR, GPU, {**SIZES, "PAD": 1}, prune="ryoo", **kw)
    rows = space_candidates(str(DESCRIPTOR), GPU, {**SIZES, "PAD": 1}, **kw)
    assert (rows["config.PAD"] == 1).all() and len(rows) + ranked.infeasible.get(
        "constraint 'N % V == 0' violated", 0) == ranked.space_size
    # Explicit candidates: the same configurations either way.
    cand = rank_configs(None, DESCRIPTOR, GPU, SIZES, configs=small_sweep, prune="ryoo")
    rows = space_candidates(str(DESCRIPTOR), GPU, {}, candidates=small_sweep)
    assert len(rows) == cand.space_size == len(small_sweep) and (rows["size.N"] == SIZES["N"]).all()
