"""The default shortlist (Pareto front over Ryoo's metrics and the time, plus the model's top-k) against a
brute-force pass; chunking and merge order; what pruning reports; top_k; explicit configurations."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybridperf.analytical.run import TIME_MODELS, analyze
from hybridperf.errors import DescriptorError, HybridperfError
from hybridperf.search.chunks import RankSpace, merge_chunks, scan_configs, with_pruned
from hybridperf.search.rank import rank_configs, resolve_top_k
from hybridperf.search.user_space import user_space

from .conftest import DESCRIPTOR, GPU, SIZES, SMALL


def _analysis(kernel, models):
    k = kernel.with_space({n: tuple(map(float, v)) for n, v in SMALL.items()})
    cfg = pd.concat(list(k.config_space()), ignore_index=True)
    return cfg, analyze(k, GPU, cfg.assign(**SIZES), models=["occupancy", "ryoo", *models])


def _dominated(obj: np.ndarray) -> np.ndarray:
    """O(n^2) from the definition, on losses (minimise every column)."""
    out = np.zeros(len(obj), dtype=bool)
    for i in range(len(obj)):
        out[i] = bool(np.any(np.all(obj <= obj[i], axis=1) & np.any(obj < obj[i], axis=1)))
    return out


@pytest.fixture(scope="module")
def predicted(model, small_sweep) -> np.ndarray:
    """The model's time for every configuration of SMALL (NaN where infeasible), in space order."""
    from hybridperf.learn.model import predict_rows

    t = np.full(len(small_sweep), np.nan)
    ok = (small_sweep["status"] == "ok").to_numpy()
    t[ok] = predict_rows(model, small_sweep[ok])["time_ms"].to_numpy()
    return t


@pytest.mark.parametrize("top_k", [1, 37, 0.02])
def test_union_is_the_front_over_metrics_and_time_plus_the_top_k(kernel, model, predicted, top_k) -> None:
    res = rank_configs(model, DESCRIPTOR, GPU, SIZES, space_overrides=SMALL, top_k=top_k, chunk_rows=700)
    _, a = _analysis(kernel, [])
    feas = np.flatnonzero(a.feasible)
    eff = a.terms["ryoo"]["efficiency"].to_numpy()[feas]
    util = a.terms["ryoo"]["utilization"].to_numpy()[feas]
    t = predicted[feas]
    front = set(feas[~_dominated(np.c_[-eff, -util, t])].tolist())
    k = top_k if isinstance(top_k, int) else int(np.ceil(top_k * len(feas)))
    top = set(feas[np.lexsort((feas, t))[:k]].tolist())
    c = res.candidates
    assert set(c["index"]) == front | top
    assert set(c.loc[c["on_front"], "index"]) == front and set(c.loc[c["in_top_k"], "index"]) == top
    assert (res.n_pareto, res.n_top_k, res.top_k) == (len(front), k, k)
    dropped = np.setdiff1d(feas, sorted(front | top))
    assert res.n_pruned == len(dropped) == res.n_feasible - len(c)
    np.testing.assert_allclose(res.best_pruned_ms, predicted[dropped].min(), rtol=1e-12)
    # The model's best are never dropped: everything pruned is predicted slower than the k-th fastest kept.
    assert res.best_pruned_ms >= np.sort(t)[k - 1]
    assert res.objectives == ("efficiency", "utilization", "time_ms") and res.prune == "union"


@pytest.mark.parametrize("top", [10, 400])
def test_default_k_fills_the_shortlist_to_a_tenth(kernel, model, predicted, top) -> None:
    from hybridperf.search.rank import FILL

    res = rank_configs(model, DESCRIPTOR, GPU, SIZES, space_overrides=SMALL, top=top, chunk_rows=900)
    _, a = _analysis(kernel, [])
    feas = np.flatnonzero(a.feasible)
    t = predicted[feas]
    front = feas[~_dominated(np.c_[-a.terms["ryoo"]["efficiency"].to_numpy()[feas],
                                   -a.terms["ryoo"]["utilization"].to_numpy()[feas], t])]
    order = feas[np.lexsort((feas, t))]
    budget = int(FILL * len(feas))
    sizes = [len(np.union1d(front, order[:k])) for k in range(len(order) + 1)]
    k = max(top, max(j for j, n in enumerate(sizes) if n <= budget))  # brute force over every k
    assert (res.top_k, res.fill) == (k, FILL)
    assert set(res.candidates["index"]) == set(np.union1d(front, order[:k]).tolist())
    assert len(res.candidates) == (budget if top == 10 else sizes[top])  # 400 > the fill: at least `top`
    assert "filled to 10% of the feasible" in res.describe_pruning()


def test_union_keeps_the_best_of_each_tie_cluster_of_ryoos_front(kernel, model, predicted) -> None:
    # Every (efficiency, utilization) point of Ryoo's two-metric front is still represented, by the
    # fastest predicted configuration of its cluster of ties.
    ryoo = rank_configs(model, DESCRIPTOR, GPU, SIZES, space_overrides=SMALL, prune="ryoo")
    union = rank_configs(model, DESCRIPTOR, GPU, SIZES, space_overrides=SMALL, top_k=1)
    points = ryoo.candidates.groupby(["efficiency", "utilization"])["time_ms"].min()
    kept = union.candidates.groupby(["efficiency", "utilization"])["time_ms"].min()
    pd.testing.assert_series_equal(kept.reindex(points.index), points)


def test_without_a_model_the_front_takes_every_analytical_time(kernel) -> None:
    res = rank_configs(None, DESCRIPTOR, GPU, SIZES, space_overrides=SMALL, chunk_rows=1000)
    _, a = _analysis(kernel, TIME_MODELS)
    feas = np.flatnonzero(a.feasible)
    times = [a.terms[m]["time_ms"].to_numpy()[feas] for m in TIME_MODELS]
    obj = np.c_[-a.terms["ryoo"]["efficiency"].to_numpy()[feas], -a.terms["ryoo"]["utilization"].to_numpy()[feas],
                np.column_stack([np.where(np.isnan(t), np.inf, t) for t in times])]
    assert set(res.candidates["index"]) == set(feas[~_dominated(obj)].tolist())
    assert res.top_k is None and res.n_top_k is None and not res.candidates["in_top_k"].any()
    assert len(res.objectives) == 2 + len(TIME_MODELS)
    assert "no model" in res.notes[0] and all(m in res.notes[0] for m in TIME_MODELS)
    assert {"mwp_cwp_ms", "roofline_ms"} <= set(res.candidates.columns)


def test_ryoo_with_a_model_reports_what_the_front_dropped(model, predicted) -> None:
    res = rank_configs(model, DESCRIPTOR, GPU, SIZES, space_overrides=SMALL, prune="ryoo")
    kept = res.candidates["index"].to_numpy()
    dropped = np.setdiff1d(np.flatnonzero(np.isfinite(predicted)), kept)
    np.testing.assert_allclose(res.best_pruned_ms, predicted[dropped].min(), rtol=1e-12)
    best_kept = res.candidates["time_ms"].min()
    assert res.best_pruned_ms < best_kept  # on this space Ryoo's front misses the model's favourite
    assert any("faster than the best kept" in n for n in res.notes)
    counts = res.counts().set_index("stage")
    assert counts.loc["pruned", "configs"] == len(dropped)
    assert counts.loc["pruned", "best_ms"] == res.best_pruned_ms
    assert counts.loc["Pareto survivors", "best_ms"] == best_kept


def test_screening_reports_the_fastest_it_removed(kernel, model, predicted) -> None:
    res = rank_configs(model, DESCRIPTOR, GPU, SIZES, space_overrides=SMALL, screen_bandwidth=True, top_k=20)
    _, a = _analysis(kernel, ["roofline"])
    mem = a.feasible & a.terms["roofline"]["memory_bound"].to_numpy(dtype=bool)
    assert res.n_screened == int(mem.sum()) > 0 and not res.candidates["memory_bound"].any()
    np.testing.assert_allclose(res.best_screened_ms, predicted[mem].min(), rtol=1e-12)
    assert res.n_pruned == res.n_feasible - res.n_screened - len(res.candidates)


@pytest.fixture(scope="module")
def chunks(model):
    """SMALL scanned in uneven chunks, union with a model: the parts a merge order test combines."""
    from hybridperf.hardware import load_gpu

    us = user_space(DESCRIPTOR, SIZES, restrict=SMALL)
    space = RankSpace(kernel=us.kernel, gpu=load_gpu(GPU), sizes=us.sizes, kernel_key=str(DESCRIPTOR), gpu_key=GPU,
                      screen_bandwidth=True, model=model, top_k=25, solver=us.space)
    pruned: dict[str, int] = {}
    parts = [scan_configs(space, cfg) for cfg in us.space.chunks(450, pruned=pruned)]
    return space, [with_pruned(parts[0], pruned), *parts[1:]]


def _key(res):
    s = res.shortlist
    kept = s.kept.sort_values("index").reset_index(drop=True)
    return kept, s.n_dropped, s.best_dropped_ms, res.n_screened, res.best_screened_ms, dict(res.infeasible)


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_merge_order_and_tree_shape_do_not_matter(chunks, data) -> None:
    space, parts = chunks
    left = parts[0]
    for p in parts[1:]:
        left = merge_chunks(left, p, space)
    pool = list(parts)
    perm = data.draw(st.permutations(range(len(pool))))
    pool = [pool[i] for i in perm]
    while len(pool) > 1:  # a random merge tree over a random order
        i = data.draw(st.integers(0, len(pool) - 2))
        pool[i:i + 2] = [merge_chunks(pool[i], pool[i + 1], space)]
    a, b = _key(left), _key(pool[0])
    pd.testing.assert_frame_equal(a[0], b[0])
    assert a[1:] == b[1:] or (np.isnan(a[2]) and np.isnan(b[2]))


def test_union_does_not_depend_on_chunking(model) -> None:
    a = rank_configs(model, DESCRIPTOR, GPU, SIZES, space_overrides=SMALL, chunk_rows=131, top_k=0.03)
    b = rank_configs(model, DESCRIPTOR, GPU, SIZES, space_overrides=SMALL, chunk_rows=100_000, top_k=0.03)
    pd.testing.assert_frame_equal(a.candidates, b.candidates)
    assert (a.n_pruned, a.best_pruned_ms, a.n_pareto, a.n_top_k) == (b.n_pruned, b.best_pruned_ms, b.n_pareto,
                                                                     b.n_top_k)


def test_a_share_is_of_the_feasible_configurations(model) -> None:
    share = rank_configs(model, DESCRIPTOR, GPU, SIZES, space_overrides=SMALL, top_k=0.05, chunk_rows=300)
    count = rank_configs(model, DESCRIPTOR, GPU, SIZES, space_overrides=SMALL, top_k=share.top_k)
    assert share.fill is None and count.fill is None
    assert share.top_k == int(np.ceil(0.05 * share.n_feasible)) < int(np.ceil(0.05 * share.space_size))
    pd.testing.assert_frame_equal(share.candidates, count.candidates)
    assert (share.n_pruned, share.best_pruned_ms) == (count.n_pruned, count.best_pruned_ms)


def test_resolve_top_k() -> None:
    assert resolve_top_k(7, 10) == 7 and resolve_top_k(np.int64(3), 10) == 3
    assert resolve_top_k(0.05, 4608) == 231 and resolve_top_k(0.01, 5) == 1
    for bad, match in ((0, "at least 1"), (1.0, r"in \(0, 1\)"), (1.5, r"in \(0, 1\)"), (-0.1, r"in \(0, 1\)"),
                       (True, "a count"), ("5", "a count")):
        with pytest.raises(HybridperfError, match=match):
            resolve_top_k(bad, 10)


def test_counts_and_pruning_summary(model) -> None:
    res = rank_configs(model, DESCRIPTOR, GPU, SIZES, space_overrides=SMALL, top_k=10)
    counts = res.counts().set_index("stage")
    c = res.candidates
    assert counts.loc["Pareto survivors", "configs"] == c["on_front"].sum() == res.n_pareto
    assert counts.loc["model top-k (k=10)", "configs"] == c["in_top_k"].sum() == 10
    assert counts.loc["ranked", "configs"] == len(c)
    assert counts.loc["ranked", "best_ms"] == c["time_ms"].min() == c.loc[c["in_top_k"], "time_ms"].min()
    assert counts.loc["pruned", "configs"] + len(c) == counts.loc["feasible", "configs"]
    p = res.pruning()
    assert (p["prune"], p["top_k"], p["pruned"], p["ranked"]) == ("union", 10, res.n_pruned, len(c))
    assert "plus the model's 10 fastest predicted" in res.describe_pruning()


def test_explicit_configs_match_the_enumerated_space(model, small_sweep) -> None:
    enumerated = rank_configs(model, DESCRIPTOR, GPU, SIZES, space_overrides=SMALL, top_k=15)
    explicit = rank_configs(model, DESCRIPTOR, GPU, SIZES, configs=small_sweep, top_k=15, chunk_rows=1000)
    pd.testing.assert_frame_equal(enumerated.candidates, explicit.candidates)
    assert explicit.space_size == len(small_sweep) and explicit.infeasible == enumerated.infeasible
    # Plain parameter columns work too; a missing parameter takes its default.
    plain = small_sweep[[c for c in small_sweep.columns if c.startswith("config.")]].rename(
        columns=lambda c: c.removeprefix("config.")).drop(columns="PAD")
    res = rank_configs(None, DESCRIPTOR, GPU, SIZES, configs=plain.head(50), prune="ryoo")
    # Without PAD, the 50 rows hold 25 distinct configurations: each is ranked once.
    assert (res.candidates["config.PAD"] == 0).all() and res.space_size == len(plain.head(50).drop_duplicates()) == 25


def test_explicit_configs_errors() -> None:
    with pytest.raises(HybridperfError, match="no candidate has BX=16"):
        rank_configs(None, DESCRIPTOR, GPU, SIZES, configs=pd.DataFrame({"BX": [4]}), space_overrides={"BX": [16]})
    with pytest.raises(DescriptorError, match="'config.ZZ' is not a config parameter"):
        rank_configs(None, DESCRIPTOR, GPU, SIZES, configs=pd.DataFrame({"config.ZZ": [4.0]}))
    with pytest.raises(HybridperfError, match="no rows"):
        rank_configs(None, DESCRIPTOR, GPU, SIZES, configs=pd.DataFrame({"BX": []}))
