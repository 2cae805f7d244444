"""kernels check: a descriptor compared with recorded runs (feasibility, each model's rank correlation, counters)."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import spearmanr

from hybridperf.datasets import load_dataset
from hybridperf.kernel import load_kernel
from hybridperf.kernel_check import check_descriptor
from hybridperf.learn.features import analytical_features, descriptor_params


def test_static_checks_name_unused_parameters() -> None:
    res = check_descriptor("kt-hotspot")
    assert res.feasibility is None and res.space == load_kernel("kt-hotspot").space_size()
    assert any(n.startswith("config parameter nvml_gr_clock enters no formula") for n in res.notes)


def test_feasibility_and_rank_correlations_against_the_runs() -> None:
    runs = load_dataset("kt-pnpoly")
    res = check_descriptor("kt-pnpoly", runs, gpus=["geforce-rtx-3060-laptop"])
    table = res.feasibility
    assert table.loc["ok"].get("infeasible", 0) == 0 and table.loc["failed", "infeasible"] > 0
    rows = runs[runs["gpu"] == "geforce-rtx-3060-laptop"].reset_index(drop=True)
    assert res.runs == len(rows) == int(table.to_numpy().sum())
    feats = analytical_features(rows)
    ok = ((rows["status"] == "ok") & (feats["feasible"] > 0)).to_numpy()
    for model, col in (("gpuperf", "log_gpuperf_ms"), ("roofline", "log_roofline_ms")):
        row = res.models[(res.models["model"] == model)].iloc[0]
        rho = spearmanr(feats[col].to_numpy()[ok], np.log(rows["time_ms"].to_numpy()[ok])).statistic
        assert row["runs"] == ok.sum() and row["spearman"] == pytest.approx(rho, abs=1e-12)


def test_counters_that_measure_a_field() -> None:
    runs = load_dataset("ktt-coulomb")
    res = check_descriptor("ktt-coulomb-sum-3d", runs)
    regs = res.counters.set_index("counter").loc["counter.registers_per_thread"]
    assert regs["field"] == "registers_per_thread"
    assert regs["runs"] == runs["counter.registers_per_thread"].notna().sum()
    # the descriptor's register estimate against the compiler's counts, row by row
    desc = load_kernel("ktt-coulomb-sum-3d")
    params = descriptor_params(desc, runs)  # empty cells (merged sources) take the defaults
    counted = np.broadcast_to(desc.profile({k: v.to_numpy() for k, v in params.items()}).registers_per_thread,
                              len(runs))
    measured = runs["counter.registers_per_thread"].to_numpy(np.float64)
    has = np.isfinite(measured)
    assert regs["median_ratio"] == pytest.approx(np.median(measured[has] / counted[has]))


def test_runs_far_from_the_roofline_suggest_a_time_unit_mixed_up() -> None:
    """Real H100 vecadd runs: no note as recorded; the same runs in microseconds labelled ms are named, with the
    ratio (1000x the recorded one)."""
    runs = load_dataset("h100-cuda-bench")
    runs = runs[runs["kernel"] == "seed004-vecadd"]
    assert not any("time unit" in n for n in check_descriptor("seed004-vecadd", runs).notes)
    notes = [n for n in check_descriptor("seed004-vecadd", runs.assign(time_ms=runs["time_ms"] * 1e3)).notes
             if "time unit" in n]
    assert len(notes) == 1 and notes[0].startswith("h100-sxm: the runs take 1.")


def test_a_family_descriptor_checks_the_runs_of_every_kernel_it_matches() -> None:
    """aiwc-counted describes the OpenDwarfs kernels by its matches = ["aiwc-*"] globs: their runs are its runs
    ('the data holds no runs of kernel aiwc-counted' before)."""
    from hybridperf.hardware import gpu_names

    runs = load_dataset("aiwc-opendwarfs")
    check = check_descriptor("aiwc-counted", runs)
    # every run of an aiwc-* kernel on a GPU with a spec (the others are counted in a note and left out)
    with_spec = runs["kernel"].astype(str).str.startswith("aiwc-") & runs["gpu"].isin(set(gpu_names()))
    assert check.runs == int(with_spec.sum()) > 0 and check.models is not None and len(check.models)


def test_every_allowed_configuration_of_the_space_evaluates(tmp_path) -> None:
    """comp_insts = N / (BLOCK - 32) + 1 was a 'valid descriptor' (finite at the default BLOCK = 256) and then
    failed 'rank' at BLOCK = 32; a constraint that rules BLOCK = 32 out makes it valid again."""
    from hybridperf.errors import DescriptorError
    from tests.paths import edited_descriptor

    path = edited_descriptor(tmp_path, "matvec", 'comp_insts = "2 * N"', 'comp_insts = "N / (BLOCK - 32) + 1"')
    with pytest.raises(DescriptorError, match=r"\[counts\].comp_insts is not finite at N=4096, BLOCK=32"):
        check_descriptor(path)
    path.write_text(path.read_text().replace("[launch]", '[space]\nconstraints = ["BLOCK > 32"]\n\n[launch]'))
    assert check_descriptor(path).space == 6
