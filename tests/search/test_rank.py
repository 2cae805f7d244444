"""rank_configs: enumeration, infeasible counts, screening, Pareto survivors, ties, chunks and Dask."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hybridperf.analytical.run import analyze
from hybridperf.errors import DescriptorError, HybridperfError
from hybridperf.search.pareto import pareto_mask
from hybridperf.search.rank import rank_configs

from .conftest import DESCRIPTOR, GPU, SIZES, SMALL


def _all(kernel, overrides, models=("occupancy", "ryoo", "roofline")):
    k = kernel.with_space({n: tuple(map(float, v)) for n, v in overrides.items()})
    cfg = pd.concat(list(k.config_space()), ignore_index=True)
    return cfg, analyze(k, GPU, cfg.assign(**SIZES), models=list(models))


def test_counts_and_front_match_a_brute_force_pass(kernel) -> None:
    res = rank_configs(None, DESCRIPTOR, GPU, SIZES, space_overrides=SMALL, chunk_rows=500, prune="ryoo")
    cfg, a = _all(kernel, SMALL)
    assert res.space_size == len(cfg) == 4608
    want = pd.Series(a.reason[~a.feasible]).value_counts().to_dict()
    assert res.infeasible == want
    assert any(r.startswith("constraint 'N % V == 0'") for r in res.infeasible)
    assert any("exceed" in r for r in res.infeasible)  # an occupancy limit
    assert res.n_feasible == int(a.feasible.sum())
    ry = a.terms["ryoo"]
    obj = np.c_[ry["efficiency"].to_numpy()[a.feasible], ry["utilization"].to_numpy()[a.feasible]]
    front = np.flatnonzero(a.feasible)[pareto_mask(obj, maximize=True)]
    assert sorted(res.candidates["index"]) == sorted(front.tolist())
    assert res.n_pareto == len(front) and res.candidates["on_front"].all()
    assert res.n_pruned == res.n_feasible - len(front) and np.isnan(res.best_pruned_ms)
    # No model: ranked by efficiency, no times, no ties claimed.
    assert res.candidates["efficiency"].is_monotonic_decreasing
    assert res.candidates["time_ms"].isna().all() and not res.candidates["tie_with_best"].any()
    counts = res.counts()
    assert counts.loc[counts["stage"] == "space", "configs"].item() == 4608


@pytest.mark.parametrize("prune", ["ryoo", "union"])
def test_result_does_not_depend_on_chunking(kernel, prune) -> None:
    a = rank_configs(None, DESCRIPTOR, GPU, SIZES, space_overrides=SMALL, chunk_rows=97, screen_bandwidth=True,
                     prune=prune)
    b = rank_configs(None, DESCRIPTOR, GPU, SIZES, space_overrides=SMALL, chunk_rows=100_000, screen_bandwidth=True,
                     prune=prune)
    pd.testing.assert_frame_equal(a.candidates, b.candidates)
    assert (a.infeasible, a.n_screened, a.n_pareto, a.n_pruned) == (b.infeasible, b.n_screened, b.n_pareto,
                                                                     b.n_pruned)


def test_bandwidth_screening_removes_memory_bound_configs(kernel) -> None:
    res = rank_configs(None, DESCRIPTOR, GPU, SIZES, space_overrides=SMALL, screen_bandwidth=True)
    _, a = _all(kernel, SMALL)
    mem = a.terms["roofline"]["memory_bound"].to_numpy(dtype=bool) & a.feasible
    assert res.n_screened == int(mem.sum()) > 0
    assert not res.candidates["memory_bound"].any() and not res.screened_fallback


@pytest.mark.parametrize("prune", ["ryoo", "union"])
def test_screening_falls_back_when_everything_is_memory_bound(prune) -> None:
    tiny = {"BX": [1], "BY": [1, 2], "TX": [1], "TY": [1], "U": [1, 2], "V": [1], "PAD": [0]}
    res = rank_configs(None, DESCRIPTOR, GPU, SIZES, space_overrides=tiny, screen_bandwidth=True, prune=prune)
    assert res.screened_fallback and res.n_screened == 0 and len(res.candidates) >= 1
    assert "memory-bound" in res.notes[0]


def test_model_ranking_intervals_and_ties(model) -> None:
    res = rank_configs(model, DESCRIPTOR, GPU, SIZES, space_overrides=SMALL, top=5)
    c = res.candidates
    assert len(res.table) == 5 and res.table["rank"].tolist() == [1, 2, 3, 4, 5]
    assert c["time_ms"].is_monotonic_increasing
    assert ((c["lo_ms"] <= c["time_ms"]) & (c["time_ms"] <= c["hi_ms"])).all()
    best = c.iloc[0]
    overlap = (c["lo_ms"] <= best["hi_ms"]) & (c["hi_ms"] >= best["lo_ms"])
    assert c["tie_with_best"].tolist() == overlap.tolist() and bool(c["tie_with_best"].iloc[0])
    for col in ("regime", "limiter", "out_of_domain", "ood_reason", "config.BX", "efficiency", "utilization",
                "register_spill"):
        assert col in res.table.columns
    assert set(res.table["limiter"]) <= {"warps", "registers", "shared memory", "blocks"}


@pytest.mark.parametrize("how", [{"prune": "none"}, {"pareto": False}])
def test_without_pruning_the_fastest_predicted_are_kept(model, kernel, small_sweep, how) -> None:
    from hybridperf.learn.model import predict_rows

    res = rank_configs(model, DESCRIPTOR, GPU, SIZES, space_overrides=SMALL, top=4, chunk_rows=1000, **how)
    assert res.n_pareto is None and res.prune == "none" and res.objectives == ()
    ok = small_sweep[small_sweep["status"] == "ok"]
    pred = predict_rows(model, ok)["time_ms"]
    np.testing.assert_allclose(res.table["time_ms"].to_numpy(), pred.nsmallest(4).to_numpy(), rtol=1e-6)
    assert res.n_pruned == len(ok) - 4
    np.testing.assert_allclose(res.best_pruned_ms, pred.nsmallest(5).iloc[-1], rtol=1e-6)
    # This scan reads feasibility from the model's features and computes Ryoo's metrics for the kept ones
    # only: the same counts and metrics as one analysis of every configuration.
    cfg, a = _all(kernel, SMALL)
    assert res.infeasible == pd.Series(a.reason[~a.feasible]).value_counts().to_dict()
    ry = a.terms["ryoo"].iloc[res.candidates["index"].to_numpy()]
    np.testing.assert_array_equal(res.candidates["efficiency"].to_numpy(), ry["efficiency"].to_numpy())
    np.testing.assert_array_equal(res.candidates["utilization"].to_numpy(), ry["utilization"].to_numpy())
    np.testing.assert_array_equal(res.candidates["register_spill"].to_numpy(),
                                  a.register_spill[res.candidates["index"].to_numpy()])


def test_rows_feed_predict_rows(model) -> None:
    from hybridperf.learn.model import predict_rows

    res = rank_configs(model, DESCRIPTOR, GPU, SIZES, space_overrides=SMALL)
    pred = predict_rows(model, res.rows())
    np.testing.assert_allclose(pred["time_ms"].to_numpy(), res.candidates["time_ms"].to_numpy(), rtol=1e-9)


def test_dask_cluster_gives_the_same_result(model) -> None:
    # Chunks come back in completion order, so this also merges in an arbitrary order.
    distributed = pytest.importorskip("distributed")
    kw = {"space_overrides": SMALL, "chunk_rows": 600, "screen_bandwidth": True, "top_k": 0.02}
    serial = rank_configs(model, DESCRIPTOR, GPU, SIZES, **kw)
    with distributed.LocalCluster(n_workers=2, processes=False, threads_per_worker=1,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        par = rank_configs(model, DESCRIPTOR, GPU, SIZES, client=client, **kw)
    pd.testing.assert_frame_equal(serial.candidates, par.candidates)
    assert (serial.infeasible, serial.n_screened, serial.n_pruned, serial.best_pruned_ms) == (
        par.infeasible, par.n_screened, par.n_pruned, par.best_pruned_ms)


def test_a_1e5_space_streams() -> None:
    from hybridperf.progress import reporting
    from tests.recorder import Recorder

    space = {"TX": [1, 2, 4, 8, 10], "TY": [1, 2, 4, 8, 10], "U": [1, 2, 4, 8, 10], "V": [1, 2], "PAD": [0, 1, 2, 3]}
    rec = Recorder()
    with reporting(rec):
        res = rank_configs(None, DESCRIPTOR, GPU, SIZES, space_overrides=space, chunk_rows=25_000, progress=True)
    assert res.space_size == 100_000  # BX and BY keep their 10 values each
    assert res.space_size == res.n_feasible + res.n_infeasible
    # progress: one task over the whole space, advanced chunk by chunk to its end
    (scan,) = rec.named("rank synthetic-10m")
    assert scan["total"] == scan["done"] == 100_000 and scan["stopped"]


def test_errors_are_one_line_and_say_how_to_fix(model) -> None:
    with pytest.raises(DescriptorError, match=r"--set BX=3 is not among the descriptor's values"):
        rank_configs(None, DESCRIPTOR, GPU, {"N": 4096, "BX": 3})
    with pytest.raises(HybridperfError, match="both fixed"):
        rank_configs(None, DESCRIPTOR, GPU, {"N": 4096, "BX": 4}, space_overrides={"BX": [4, 16]})
    with pytest.raises(DescriptorError, match="unknown"):
        rank_configs(None, DESCRIPTOR, GPU, {"Q": 4})
    with pytest.raises(HybridperfError, match="one problem size at a time"):
        rank_configs(None, DESCRIPTOR, GPU, {"N": [1024, 2048]})
    with pytest.raises(DescriptorError, match="not among the descriptor's values"):
        rank_configs(None, DESCRIPTOR, GPU, SIZES, space_overrides={"BX": [3]})
    with pytest.raises(DescriptorError, match="unknown config parameter"):
        rank_configs(None, DESCRIPTOR, GPU, SIZES, space_overrides={"ZZ": [3]})
    with pytest.raises(HybridperfError, match="needs a model"):
        rank_configs(None, DESCRIPTOR, GPU, SIZES, pareto=False)
    with pytest.raises(HybridperfError, match="unknown prune mode 'pareto'; choose from union, ryoo, none"):
        rank_configs(None, DESCRIPTOR, GPU, SIZES, space_overrides=SMALL, prune="pareto")
    with pytest.raises(HybridperfError, match="chunk_rows"):
        rank_configs(None, DESCRIPTOR, GPU, SIZES, space_overrides=SMALL, chunk_rows=0)


def test_without_a_model_the_hierarchical_roofline_orders_the_front() -> None:
    """Kernel Tuner's CLBlast gemm runs on the RTX 2080 Ti (17,956 configurations, each measured): the
    configuration listed first without a model runs at 0.69 of the measured optimum (0.81 before an SM of compute
    capability 7.0 issued 4 warp instructions per cycle, features version 7); Ryoo's most efficient, the order
    before, at 0.08 (experiments/results/kt_analytical_rank.md)."""
    from hybridperf.datasets import load_dataset

    runs = load_dataset("kt-gemm-rtx")
    runs = runs[(runs["gpu"] == "geforce-rtx-2080-ti") & (runs["status"] == "ok")].reset_index(drop=True)
    names = [c.removeprefix("config.") for c in runs.columns if c.startswith("config.")]
    res = rank_configs(None, "clblast-xgemm", "rtx-2080-ti", {"M": 4096, "N": 4096, "K": 4096},
                       configs=runs[[f"config.{n}" for n in names]].set_axis(names, axis=1), top=5)
    ranked = res.candidates
    assert ranked["hierarchical_ms"].is_monotonic_increasing and ranked["time_ms"].isna().all()
    first = ranked.iloc[0][[f"config.{n}" for n in names if f"config.{n}" in ranked.columns]]
    hit = (runs[first.index] == first.to_numpy()).all(axis=1)
    assert hit.sum() == 1
    assert runs["time_ms"].min() / runs.loc[hit, "time_ms"].item() >= 0.65


def test_a_size_not_given_is_named_in_a_note() -> None:
    """Ranked at the descriptor's default N with nothing said before (the command line marked it, Python did not)."""
    res = rank_configs(None, "matvec", "h200", {})
    assert res.defaulted_sizes == ("N",) and res.sizes["N"] == 4096
    assert res.notes[0] == res.defaulted_note() and "default problem size N=4096" in res.notes[0]
    given = rank_configs(None, "matvec", "h200", {"N": 4096})
    assert given.defaulted_sizes == () and given.defaulted_note() == "" and not any("default" in n for n in given.notes)


@pytest.mark.parametrize("configs, message", [
    (pd.DataFrame({"BLOK": [64, 128]}), r"candidates column 'BLOK' is no parameter \(did you mean BLOCK\?\)"),
    (pd.DataFrame({"foo": [1, 2]}), "the candidates name no config parameter"),
    ("BLOCK=64", "the candidates must be a pandas DataFrame"),
])
def test_candidates_naming_no_parameter_are_refused(configs, message: str) -> None:
    """Each ranked the one default configuration (BLOCK = 256) with nothing said."""
    with pytest.raises(HybridperfError, match=message):
        rank_configs(None, "matvec", "h200", {"N": 8192}, configs=configs)


def test_candidates_as_a_mapping_or_records_are_a_table() -> None:
    want = rank_configs(None, "matvec", "h200", {"N": 8192}, configs=pd.DataFrame({"BLOCK": [64, 128]}))
    for given in ({"BLOCK": [64, 128]}, [{"BLOCK": 64}, {"BLOCK": 128}]):
        res = rank_configs(None, "matvec", "h200", {"N": 8192}, configs=given)
        pd.testing.assert_frame_equal(res.candidates, want.candidates)


@pytest.mark.parametrize("kwargs, message", [
    ({"top": 2.5}, "top must be a whole number >= 1"),
    ({"top": 0}, "top must be a whole number >= 1"),
    ({"space_overrides": {"BLOCK": "abc"}}, "the values allowed for BLOCK must be numbers"),
    ({"space_overrides": {"BLOCK": []}}, "the values allowed for BLOCK must be a flat, non-empty list"),
])
def test_arguments_of_the_wrong_kind_are_named(kwargs, message: str) -> None:
    """Each was a TypeError from inside (slice indices, iterating an int) before."""
    with pytest.raises(HybridperfError, match=message):
        rank_configs(None, "matvec", "h200", {"N": 8192}, **kwargs)


def test_one_allowed_value_may_be_given_alone() -> None:
    res = rank_configs(None, "matvec", "h200", {"N": 8192}, space_overrides={"BLOCK": 128})
    assert list(res.candidates["config.BLOCK"]) == [128]


def test_a_candidate_value_that_is_no_number_is_refused() -> None:
    """'big' was ranked as the default BLOCK = 256; an empty cell still takes the default."""
    with pytest.raises(DescriptorError, match=r"the candidates' BLOCK holds 'big' in 1 rows, not a number"):
        rank_configs(None, "matvec", "h200", {"N": 8192}, configs=pd.DataFrame({"config.BLOCK": [64, "big"]}))
    res = rank_configs(None, "matvec", "h200", {"N": 8192},
                       configs=pd.DataFrame({"config.BLOCK": [64, None], "size.N": 8192}))
    assert sorted(res.candidates["config.BLOCK"]) == [64, 256]


def test_a_value_given_twice_is_ranked_once() -> None:
    res = rank_configs(None, "matvec", "h200", {"N": 8192}, space_overrides={"BLOCK": [32, 32, 64]})
    assert sorted(res.candidates["config.BLOCK"]) == [32, 64]


def test_a_huge_tie_on_the_front_keeps_its_lowest_indices_whatever_the_chunks(tmp_path) -> None:
    """Parameters no count depends on multiply ties: a hostile descriptor put 2.5M tied configurations on the front
    (3 GB). Of each tie the TIE_CAP of lowest index stay, the same for any chunking, and a note says so."""
    from pathlib import Path

    from hybridperf.kernel import load_kernel
    from hybridperf.search.chunks import TIE_CAP

    text = Path(load_kernel("matvec").path).read_text()
    dummy = "[config]\nX0 = { values = %s, default = 0 }\nX1 = { values = %s, default = 0 }\n" % (
        list(range(40)), list(range(40)))
    path = tmp_path / "ties.toml"
    path.write_text(text.replace("[config]\n", dummy))
    runs = [rank_configs(None, str(path), "titan-v", {"N": 4096}, prune="ryoo", top=5, chunk_rows=c)
            for c in (700, 100_000)]
    a, b = (r.candidates.sort_values("index").reset_index(drop=True) for r in runs)
    pd.testing.assert_frame_equal(a, b)
    front = a[a["on_front"]]
    per_tie = front.groupby(["efficiency", "utilization"])["index"]
    assert per_tie.size().max() == TIE_CAP < 40 * 40
    assert all(any(f"ties of {TIE_CAP:,} or more" in n for n in r.notes) for r in runs)
    # the kept ones are the lowest indices of their tie: brute force over the whole space
    cfg, full = _all(load_kernel(path), {})
    ok = full.feasible
    keys = pd.DataFrame({"e": full.terms["ryoo"]["efficiency"], "u": full.terms["ryoo"]["utilization"]})[ok]
    lowest = keys.assign(index=cfg.index[ok]).groupby(["e", "u"])["index"].apply(lambda s: sorted(s)[:TIE_CAP])
    for (e, u), idx in per_tie:
        assert sorted(idx) == lowest.loc[(e, u)]


def test_one_candidate_as_a_mapping_of_values() -> None:
    res = rank_configs(None, "matvec", "h200", {"N": 8192}, configs={"BLOCK": 64})
    assert list(res.candidates["config.BLOCK"]) == [64]
