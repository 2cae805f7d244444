"""GPUPerf advice: benefit shares add up with the model's terms, the zone follows the benefit chart, charts draw."""
from __future__ import annotations

import numpy as np
import pytest

from hybridperf.advise.benefits import BENEFIT_FAMILIES, advise, advise_samples, benefit_chart, format_advice
from hybridperf.analytical.run import analyze
from tests.paths import GPA_FIXTURES


@pytest.fixture(scope="module")
def adv():
    return advise("seed004-matvec", "titan-v", {"N": [1024.0, 8192.0, 65536.0]})


def test_table_matches_gpuperf_and_shares_are_fractions(adv) -> None:
    gp = analyze("seed004-matvec", "titan-v", {"N": [1024.0, 8192.0, 65536.0]}, models=["gpuperf"]).terms["gpuperf"]
    np.testing.assert_allclose(adv.table["t_exec_ms"], gp["time_ms"])
    for b in BENEFIT_FAMILIES:
        np.testing.assert_allclose(adv.table[f"share_{b}"], gp[b] / gp["t_exec"])
    # B_memlp is the memory time beyond the ideal, never negative (GPUPerf Eq. 23).
    assert (adv.table["b_memlp_ms"] >= 0).all()
    # The zone is the side of the y = x line of the benefit chart (T_comp vs T'_mem).
    want = np.where(adv.table.t_comp_ms >= adv.table.t_mem_prime_ms, "compute-bound", "memory-bound")
    assert list(adv.table["zone"]) == list(want)


def test_report_names_each_row_and_the_top_benefits(adv) -> None:
    text = format_advice(adv)
    assert text.count("[N=") == 3 and "regime" in text
    for top in adv.table["top"]:
        for b in filter(None, top.split(",")):
            assert b in text


def test_infeasible_rows_are_marked() -> None:
    # TILE = 32: 1024 threads per block, over the 512 of cc 1.0.
    a = advise("seed002-tiled-matmul", "geforce-8800-gtx", {"N": [1024.0], "TILE": [32.0]})
    assert not a.feasible[0] and a.table["zone"].iloc[0] == "infeasible" and "infeasible" in format_advice(a)


def test_chart_file_is_a_png(adv, tmp_path) -> None:
    path = benefit_chart(adv, tmp_path / "b.png", row=1)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000


def test_gpa_uses_the_spec_geometry_and_the_row_launch(adv) -> None:
    report = advise_samples(adv, GPA_FIXTURES / "loop" / "samples.csv", row=0)
    assert report.arch.sm_count == 80 and report.arch.schedulers_per_sm == 4  # TITAN V: 80 SMs, 4 schedulers


def test_the_hierarchical_roofline_says_which_level_limits_each_launch() -> None:
    """KTT CoulombSum3d on the RTX 2080 Ti with its energyValue[] in local memory (U = 1) and in registers
    (U = 0): the report gives the hierarchical roofline's time and limiting level as analyze computes them,
    and the local array's traffic shows in the L2 and DRAM bytes (11.8 and 3.2 GB against 0.13 GB). With the
    array in registers the SFU limits (its reciprocal square roots on 16 lanes per SM): the Turing SM's four
    schedulers issue the rest beside them (issue level 0.35 ms against the SFU's 0.65 ms)."""
    rows = {"Z_ITERATIONS": [32.0, 32.0], "INNER_UNROLL_FACTOR": [1.0, 0.0]}
    a = advise("ktt-coulomb-sum-3d", "rtx-2080-ti", rows)
    hi = analyze("ktt-coulomb-sum-3d", "rtx-2080-ti", rows, models=["hierarchical"]).terms["hierarchical"]
    np.testing.assert_allclose(a.table["hierarchical_ms"], hi["time_ms"])
    levels = a.table[[c for c in a.table.columns if c.startswith("h_") and c.endswith("_ms")]].to_numpy()
    np.testing.assert_allclose(levels.max(axis=1), [hi["latency_ms"].iloc[0], hi["sfu_ms"].iloc[1]])
    assert list(a.table["hierarchical_limiter"]) == ["latency", "sfu"]
    local, registers = a.table.iloc[0], a.table.iloc[1]
    assert local.dram_gb > 20 * registers.dram_gb and local.l2_gb > 50 * registers.l2_gb
    text = format_advice(a)
    assert text.count("hierarchical roofline") == 2 and "limited by latency" in text and "limited by sfu" in text


def test_a_long_grid_details_its_first_launches_and_moves_over_all() -> None:
    """100,000 launches printed 800,000 lines in 65 s; the bottleneck's moves still cover every launch."""
    adv = advise("tiled-matmul", "gtx-280", {"N": [64 * (i + 1) for i in range(150)]})
    text = format_advice(adv, max_launches=20)
    assert text.count("\n[N=") == 20 and "(130 more launches" in text
    t = adv.table[adv.feasible]
    changes = sum(1 for i in range(1, len(t)) if (t.zone.iloc[i], t.regime.iloc[i]) != (t.zone.iloc[i - 1],
                                                                                           t.regime.iloc[i - 1]))
    moves = text.split("bottleneck across the rows: ")[1]
    assert moves.count("from N=") == changes
