"""Device names as tools print them: the table's entries resolve to their spec or are refused with the fix."""
from __future__ import annotations

import re

import pytest

from hybridperf.devices import match_device, resolve_device
from hybridperf.errors import UnknownGPUError
from hybridperf.hardware import device_table, load_gpu, normalize_name

TABLE = device_table()


def test_the_table_holds_thirty_sourced_names() -> None:
    assert len(TABLE) >= 30
    for entry in TABLE.values():
        assert entry["source"] and entry.get("gpu") or entry.get("refuse")
    assert sum("gpu" in e for e in TABLE.values()) >= 20 and sum("refuse" in e for e in TABLE.values()) >= 10


@pytest.mark.parametrize("key", sorted(TABLE))
def test_every_entry_resolves_as_the_table_says(key) -> None:
    entry = TABLE[key]
    match = match_device(entry["name"])
    if "gpu" in entry:
        assert resolve_device(entry["name"]).key == load_gpu(entry["gpu"]).key == match.stem
    else:
        with pytest.raises(UnknownGPUError, match="device .*: " + re.escape(entry["refuse"][:30])):
            resolve_device(entry["name"])
        assert match.spec is None and match.listed


@pytest.mark.parametrize(("printed", "stem"), [
    ("NVIDIA H100 80GB HBM3", "h100-sxm"),  # nvidia-smi / CUDA on an SXM5 H100
    ("nvidia h100 80gb hbm3 ", "h100-sxm"),  # case and spacing do not matter
    ("Tesla V100-PCIE-32GB", "tesla-v100-pcie-32gb"),
    ("GeForce RTX 2080 Ti", "geforce-rtx-2080-ti"),  # older drivers leave the vendor out: the spec's name matches
    ("NVIDIA GeForce RTX 2080 Ti", "geforce-rtx-2080-ti"),
    ("NVIDIA A100-SXM4-80GB", "a100-sxm-80gb"),
    ("NVIDIA A100 80GB PCIe", "a100-pcie-80gb"),
    ("a100", "a100-pcie-40gb"),  # a spec alias
])
def test_printed_names(printed, stem) -> None:
    assert resolve_device(printed).key == stem


@pytest.mark.parametrize(("printed", "message"), [
    ("Tesla V100-SXM2...", "cut the name short; take the full one with nvidia-smi --query-gpu=name"),
    ("NVIDIA A100-SXM4-40GB", "no spec for the 40 GB SXM4 A100"),
    ("Fiji", "OpenCL names the AMD chip"),
    ("NVIDIA GeForce RTX 5090", "no GPU spec matches .* known_gpus=geforce-rtx-5090"),
])
def test_refusals_name_the_fix(printed, message) -> None:
    with pytest.raises(UnknownGPUError, match=message):
        resolve_device(printed)


def test_the_data_sets_device_names_all_resolve() -> None:
    # the names the shipped data's sources record (Kernel Tuner hub, KTT, NeuSight)
    for name in ("NVIDIA A100-PCIE-40GB", "NVIDIA RTX A4000", "NVIDIA GeForce RTX 3060 Laptop GPU", "NVIDIA TITAN RTX",
                 "GeForce GTX 1070", "Tesla P100-PCIE-16GB", "Tesla P4", "Tesla T4"):
        assert match_device(name).spec is not None, name


def test_a_listed_device_without_a_spec_is_refused_when_recording() -> None:
    from hybridperf.errors import RecordError
    from hybridperf.record.device import match_gpu_spec

    a100 = load_gpu("a100-pcie-40gb")  # same cc and SM count as the SXM4 40 GB card the table refuses
    with pytest.raises(RecordError, match="no spec for the 40 GB SXM4 A100"):
        match_gpu_spec("NVIDIA A100-SXM4-40GB", a100.compute_capability, a100.sm_count, 40 << 30)
    assert match_gpu_spec("NVIDIA H100 80GB HBM3", "9.0", 132, 80 << 30).key == "h100-sxm"
    assert normalize_name("NVIDIA H100 80GB HBM3") in TABLE


def test_every_gpu_option_takes_printed_names_and_the_table_names_shipped_specs() -> None:
    assert load_gpu("NVIDIA H100 80GB HBM3").key == "h100-sxm"  # e.g. analyze --gpu "NVIDIA H100 80GB HBM3"
    with pytest.raises(UnknownGPUError, match="no spec for the SXM2 V100"):
        load_gpu("Tesla V100-SXM2-16GB")
    for entry in TABLE.values():
        if "gpu" in entry:
            assert load_gpu(entry["gpu"]).path, entry["name"]
