"""Every real-kernel descriptor loads, evaluates on its defaults and runs through all analytical models."""
from __future__ import annotations

import numpy as np
import pytest

from hybridperf.analytical.run import analyze
from hybridperf.kernel import load_kernel
from hybridperf.profile import PROFILE_FIELDS
from tests.paths import REPO

from ._data import REAL_KERNELS

KERNEL_DIR = REPO / "hybridperf" / "kernels"


@pytest.mark.parametrize("name", REAL_KERNELS)
def test_loads_by_name_and_path(name: str) -> None:
    by_name = load_kernel(name)
    by_path = load_kernel(KERNEL_DIR / f"{name}.toml")
    assert by_name.name == by_path.name == name
    assert by_name.source and by_name.description
    assert "notes" in (KERNEL_DIR / f"{name}.toml").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", REAL_KERNELS)
def test_defaults_are_valid_and_finite(name: str) -> None:
    k = load_kernel(name)
    ok, reasons = k.constraint_mask({})
    assert ok.all(), reasons
    prof = k.profile({})
    for f in PROFILE_FIELDS:
        v = getattr(prof, f)
        assert np.isfinite(v).all() and (v >= 0).all(), f
    assert prof.flops[0] > 0 and prof.dram_bytes[0] > 0
    assert prof.coal_mem_insts[0] + prof.uncoal_mem_insts[0] > 0


@pytest.mark.parametrize("name", REAL_KERNELS)
@pytest.mark.parametrize("gpu", ["rtx-2080-ti", "a100-pcie-40gb", "tesla-p100-pcie-16gb"])
def test_models_give_finite_times(name: str, gpu: str) -> None:
    s = analyze(name, gpu, {}).summary()
    assert (s["status"] == "ok").all(), s["status"].tolist()
    for col in ("mwp_cwp_ms", "gpuperf_ms", "roofline_ms"):
        assert np.isfinite(s[col]).all() and (s[col] > 0).all(), col


@pytest.mark.parametrize("name", REAL_KERNELS)
def test_vectorised_and_scalar_evaluation_agree(name: str) -> None:
    k = load_kernel(name)
    first = k.config[0]
    assert first.values is not None
    values = np.asarray(first.values[:3], dtype=float)
    vec = k.profile({first.name: values}).to_frame()
    for i, v in enumerate(values):
        one = k.profile({first.name: v}).to_frame().iloc[0]
        np.testing.assert_allclose(one.to_numpy(), vec.iloc[i].to_numpy(), rtol=1e-12)


def test_uci_gemm_default_runs_on_the_gtx680() -> None:
    s = analyze("clblast-xgemm", "gtx680", {"M": 2048, "N": 2048, "K": 2048}).summary()
    assert (s["status"] == "ok").all() and np.isfinite(s["mwp_cwp_ms"]).all()
