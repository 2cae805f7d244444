"""Every shipped GPU spec loads and is sane; malformed specs give one-line errors."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hybridperf.errors import SpecError, UnknownGPUError
from hybridperf.hardware import gpu_names, list_gpus, load_cc_limits, load_gpu

REQUIRED = {
    "8800-gtx", "quadro-fx5600", "8800-gt", "gtx-280", "tesla-c2050", "titan-v", "gtx-680", "gtx-1070",
    "tesla-p4", "tesla-p100", "tesla-v100", "tesla-t4", "rtx-2080-ti", "titan-rtx", "rtx-3060-laptop",
    "rtx-3090", "rtx-a4000", "rtx-a6000", "a100-pcie-40gb", "a100-80gb", "l4", "h100-sxm", "h100-pcie", "h200",
}


def test_all_required_gpus_are_shipped() -> None:
    names = set(gpu_names())
    missing = {n for n in REQUIRED if n not in names and not any(n in s.aliases for s in list_gpus())}
    assert not missing


def test_a_file_stem_is_read_alone_and_stays_one_object() -> None:
    # In a new process: a stem lookup parses no other spec file, and later lookups (alias, full scan) return
    # the very object it made.
    code = ("import hybridperf.hardware as h; g = h.load_gpu('tesla-t4'); assert h._shipped.cache_info().currsize == 0;"
            " assert h._parse_shipped.cache_info().currsize == 1; assert h.load_gpu('T4') is g;"
            " assert sum(s is g for s in h.list_gpus()) == 1; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


@pytest.mark.parametrize("gpu", list_gpus(), ids=lambda g: Path(g.path).stem)
def test_shipped_spec_is_sane(gpu) -> None:
    # Peak FP32 = SMs x clock x FP32 lanes x 2 (an FMA is two flops), within 3%.
    derived = gpu.sm_count * gpu.core_clock_mhz * gpu.fp32_lanes_per_sm * 2 / 1000
    assert derived == pytest.approx(gpu.peak_fp32_gflops, rel=0.03)
    assert 10 <= gpu.dram_bandwidth_gbs <= 6000
    assert 1 <= gpu.sm_count <= 200
    assert 100 <= gpu.core_clock_mhz <= 3000
    assert gpu.limits.warp_size == 32
    assert gpu.limits.max_warps_per_sm * 32 == gpu.limits.max_threads_per_sm
    assert 100 <= gpu.dram_latency_cycles <= 2000
    for key in ("spec.sm_count", "model.dram_latency_cycles", "model.sync_gamma"):
        assert gpu.sources[key].strip()
    assert load_gpu(gpu.name) is gpu
    for alias in gpu.aliases:
        assert load_gpu(alias) is gpu


def test_lookup_ignores_case_and_punctuation() -> None:
    assert load_gpu("TITAN V").name == load_gpu("titan-v").name == load_gpu("titanv").name


def test_unknown_gpu() -> None:
    with pytest.raises(UnknownGPUError, match="unknown GPU 'gtx 9999'.*hybridperf gpus"):
        load_gpu("gtx 9999")
    with pytest.raises(UnknownGPUError, match="does not exist"):
        load_gpu("nope/missing.toml")


def _spec_text(**edits: str) -> str:
    text = Path(load_gpu("titan-v").path).read_text()
    for old, new in edits.items():
        assert old in text or old == "", old
        text = text.replace(old, new)
    return text


@pytest.mark.parametrize("mutate, message", [
    (lambda t: t.replace("format_version = 1", "format_version = 9"), "format_version must be 1"),
    (lambda t: t + "\n[spec2]\nx = 1\n", "unknown top-level key 'spec2'"),
    (lambda t: t.replace("sm_count", "sm_cnt", 1), "unknown key spec.sm_cnt"),
    (lambda t: t.replace('compute_capability = "7.0"', 'compute_capability = "4.2"'), "unknown compute capability"),
    (lambda t: t + "\n[limits]\nmax_warps_per_sm = 64\n", "limits.max_warps_per_sm must be"),
    (lambda t: t[: len(t) // 2] + "= = =", "not valid TOML"),
])
def test_malformed_spec_gives_one_line_error(tmp_path: Path, mutate, message: str) -> None:
    p = tmp_path / "bad.toml"
    p.write_text(mutate(Path(load_gpu("titan-v").path).read_text()))
    with pytest.raises(SpecError, match=message) as e:
        load_gpu(str(p))
    assert str(p) in str(e.value) and "\n" not in str(e.value)


def test_missing_value_and_source(tmp_path: Path) -> None:
    import re
    text = Path(load_gpu("titan-v").path).read_text()
    p = tmp_path / "nosrc.toml"
    p.write_text(re.sub(r'(sm_count\s*=\s*\{\s*value\s*=\s*\d+\s*),\s*source\s*=\s*"[^"]*"', r"\1", text, count=1))
    with pytest.raises(SpecError, match="spec.sm_count must be"):
        load_gpu(p)
    p.write_text(re.sub(r'(sm_count\s*=\s*\{\s*value\s*=\s*)\d+', r'\g<1>-3', text, count=1))
    with pytest.raises(SpecError, match="spec.sm_count value must be a finite number from 0"):
        load_gpu(p)
    p.write_text(re.sub(r'(sm_count\s*=\s*\{\s*value\s*=\s*)(\d+)', r'\g<1>"\2"', text, count=1))
    with pytest.raises(SpecError, match=r"got the text '80' \(write the number without quotes\)"):
        load_gpu(p)
    p.write_text(re.sub(r"\n\s*sm_count\s*=.*", "", text, count=1))
    with pytest.raises(SpecError, match="missing spec.sm_count"):
        load_gpu(p)


def test_user_spec_file_by_path(tmp_path: Path) -> None:
    p = tmp_path / "mine.toml"
    p.write_text(Path(load_gpu("titan-v").path).read_text().replace('name = "', 'name = "My ', 1))
    g = load_gpu(str(p))
    assert g.name.startswith("My ") and g.sm_count == load_gpu("titan-v").sm_count


def test_cc_table_covers_1_0_to_9_0() -> None:
    for cc in ["1.0", "1.1", "1.2", "1.3", "2.0", "2.1", "3.0", "3.5", "3.7", "5.0", "5.2", "6.0", "6.1",
               "7.0", "7.5", "8.0", "8.6", "8.9", "9.0"]:
        L = load_cc_limits(cc)
        assert L.max_warps_per_sm * L.warp_size == L.max_threads_per_sm
        assert L.register_alloc_granularity == ("block" if cc.startswith("1.") else "warp")
    with pytest.raises(SpecError, match="unknown compute capability"):
        load_cc_limits("4.0")


def test_optional_machine_parameters_default_and_say_so(tmp_path: Path) -> None:
    text = Path(load_gpu("titan-v").path).read_text()
    g = load_gpu("titan-v")
    assert "l2_bandwidth_gbs" not in text  # the shipped TITAN V spec gives none: every value is a default
    assert g.l2_bandwidth_gbs == pytest.approx(3 * g.dram_bandwidth_gbs)
    assert g.smem_bytes_per_cycle_per_sm == 128 and g.l1_bytes_per_cycle_per_sm == 128
    assert g.fp32_lanes_per_sm == 64 and g.issue_per_cycle_per_sm == 4  # Volta: 4 partitions x 1 dispatch per cycle
    assert g.sources["model.l2_bandwidth_gbs"].startswith("default:")
    assert load_gpu("gtx-680").smem_bytes_per_cycle_per_sm == 256  # Kepler: 64-bit banks
    p = tmp_path / "given.toml"
    p.write_text(text.replace("[model]", '[model]\nl2_bandwidth_gbs = { value = 2155, source = "measured" }', 1))
    given = load_gpu(str(p))
    assert given.l2_bandwidth_gbs == 2155 and given.sources["model.l2_bandwidth_gbs"] == "measured"
    p.write_text(text.replace("[model]", '[model]\nlaunch_overhead_us = { value = -1, source = "x" }', 1))
    with pytest.raises(SpecError, match="model.launch_overhead_us value must be a finite number from 0"):
        load_gpu(str(p))


def test_the_power_cap_defaults_from_the_process_node_and_can_be_given(tmp_path: Path) -> None:
    """energy_per_inst_pj defaults to 2.24 pJ x process_nm (and says so); a spec without the node has none; a
    spec may give its own; a bad node is refused with one line."""
    g = load_gpu("titan-v")
    assert g.process_nm == 12 and g.energy_per_inst_pj == pytest.approx(2.24 * 12)
    assert g.sources["model.energy_per_inst_pj"].startswith("default:") and g.power_burst_ms == 0.27
    text = Path(g.path).read_text()
    p = tmp_path / "node.toml"
    p.write_text("\n".join(line for line in text.split("\n") if not line.startswith("process_nm")))
    bare = load_gpu(str(p))
    assert bare.process_nm is None and bare.energy_per_inst_pj is None
    assert "model.energy_per_inst_pj" not in bare.sources
    p.write_text(text.replace("[model]", '[model]\nenergy_per_inst_pj = { value = 12.5, source = "measured" }', 1))
    assert load_gpu(str(p)).energy_per_inst_pj == 12.5
    p.write_text(text.replace("process_nm         = { value = 12", "process_nm         = { value = -12", 1))
    with pytest.raises(SpecError, match="spec.process_nm value must be a finite number from 0") as e:
        load_gpu(str(p))
    assert "\n" not in str(e.value)
    assert all(s.process_nm is not None for s in list_gpus())  # every shipped spec names its node


@pytest.mark.parametrize(("name", "meant"), [("h2000", "h200"), ("a10O", "a100-pcie-40gb"),
                                             ("rtx-a5000", "rtx-a6000")])
def test_an_unknown_gpu_name_close_to_one_names_it(name: str, meant: str) -> None:
    """The closest, not 'did you mean': an A5000 has no spec, and the A6000 is another part."""
    with pytest.raises(UnknownGPUError, match=rf"unknown GPU '{name}' \(the closest name with a spec: '{meant}'\)"):
        load_gpu(name)
    assert load_gpu(meant).key == meant


@pytest.mark.parametrize("key", ["warp_size", "warp_alloc_granularity", "register_alloc_unit", "smem_alloc_unit_bytes",
                                 "max_threads_per_block"])
def test_a_zero_limit_is_refused(tmp_path: Path, key: str) -> None:
    """warp_size / warp_alloc_granularity = 0 divided by zero (exit 70); the allocation units = 0 made every launch
    'ok' with no time."""
    text = Path(load_gpu("titan-v").path).read_text()
    p = tmp_path / "zero.toml"
    p.write_text(text + f'\n[limits]\n{key} = {{ value = 0, source = "x" }}\n')
    with pytest.raises(SpecError, match=rf"limits.{key} must be at least 1, got 0"):
        load_gpu(p)
    p.write_text(text + '\n[limits]\nreserved_smem_per_block_bytes = { value = 0, source = "x" }\n')
    assert load_gpu(p).limits.reserved_smem_per_block_bytes == 0


@pytest.mark.parametrize(("key", "value", "unit"), [("core_clock_mhz", 1.455, "MHz"),
                                                    ("dram_bandwidth_gbs", 0.6528, "GB/s"),
                                                    ("peak_fp32_gflops", 14.9, None)])
def test_a_value_in_another_unit_is_refused(tmp_path: Path, key: str, value: float, unit: str | None) -> None:
    """A clock of 1.455 (GHz given as MHz) or a bandwidth of 0.6528 (TB/s as GB/s) made every time ~1000x off."""
    import re

    text = Path(load_gpu("titan-v").path).read_text()
    p = tmp_path / "unit.toml"
    p.write_text(re.sub(rf"^({key}\s*=\s*\{{\s*value\s*=\s*)[\d.]+", rf"\g<1>{value}", text, count=1, flags=re.M))
    if unit is None:  # 14.9 GFLOP/s is a slow part, not another unit: kept
        assert load_gpu(p).peak_fp32_gflops == value
        return
    with pytest.raises(SpecError, match=rf"spec.{key} = {value:g} lies outside .* give it in {unit}"):
        load_gpu(p)


def test_a_format_version_of_true_is_no_version(tmp_path: Path) -> None:
    """format_version = true was read as 1 (True == 1 in Python)."""
    p = tmp_path / "fv.toml"
    p.write_text(Path(load_gpu("titan-v").path).read_text().replace("format_version = 1", "format_version = true", 1))
    with pytest.raises(SpecError, match="format_version must be 1, got True"):
        load_gpu(p)


@pytest.mark.parametrize("ways", [0.5, 64])
def test_bank_ways_outside_one_to_a_warp_are_refused(tmp_path: Path, ways: float) -> None:
    """Fewer than one address per bank per cycle would charge a conflict more than its wavefronts, more than 32 (a
    warp's lanes) is no bank: both refused with the unit named; 2 (the GA10x specs) loads."""
    text = Path(load_gpu("rtx-a4000").path).read_text()
    assert load_gpu("rtx-a4000").smem_bank_ways_per_cycle == 2
    p = tmp_path / "ways.toml"
    p.write_text(text.replace("smem_bank_ways_per_cycle      = { value = 2,",
                              f"smem_bank_ways_per_cycle = {{ value = {ways},"))
    refused = rf"smem_bank_ways_per_cycle = {ways:g} lies outside 1 \.\. 32, .* addresses one"
    with pytest.raises(SpecError, match=refused):
        load_gpu(p)
