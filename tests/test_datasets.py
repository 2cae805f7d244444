"""The shipped datasets: each loads and validates, carries provenance and licence, and stays small."""
from __future__ import annotations

import re

import pandas as pd
import pytest

from hybridperf.datasets import datasets_dir, describe_datasets, list_datasets, load_dataset
from hybridperf.errors import SweepError
from hybridperf.sweep import validate_sweep
from hybridperf.sweepfile import read_provenance, write_sweep
from tests.paths import REPO, stem

SHIPPED = {
    # name: (rows, ok, failed, invalid)
    "uci-sgemm-gtx680": (241600, 241600, 0, 0),
    "kt-gemm-rtx": (45912, 45912, 0, 0),
    "kt-convolution": (29028, 24134, 4894, 0),
    "kt-dedispersion": (22260, 22260, 0, 0),
    "kt-pnpoly": (12276, 11258, 1018, 0),
    "kt-hotspot": (1660, 1660, 0, 0),
    "kt-expdist": (2885, 1505, 1380, 0),
    "ktt-coulomb": (420, 420, 0, 0),
    "neusight-gemm": (119847, 119847, 0, 0),
    "neusight-ops": (136587, 136587, 0, 0),
    "aiwc-opendwarfs": (957, 957, 0, 0),
}
INFOS = {i.name: i for i in list_datasets()}


def test_every_folder_with_data_and_readme_is_discovered() -> None:
    assert datasets_dir() == REPO / "datasets"
    assert set(SHIPPED) | {"titanv-seed004"} <= set(INFOS)


@pytest.fixture(scope="module")
def described() -> dict[str, dict]:
    """describe_datasets() loads and validates every dataset once; the tests below share it."""
    return {r["name"]: r for r in describe_datasets()}


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_dataset_loads_with_its_counts(name, described) -> None:
    row = described[name]
    assert (row["rows"], row["ok"], row["failed"], row["invalid"]) == SHIPPED[name]
    prov = read_provenance(INFOS[name].data_path)
    assert prov["dataset"] == name and ", ".join(prov["gpus"]) == row["gpus"]
    for src in prov["sources"]:
        assert re.fullmatch(r"[0-9a-f]{40}", src["commit"]) and len(src["sha256"]) == 64 and src["repo"]
    assert sum(s["rows"] for s in prov["sources"]) == row["rows"]
    assert set(prov["gpus_without_spec"]) <= set(prov["gpus"])


def test_load_dataset_returns_the_validated_table() -> None:
    df = load_dataset("kt-hotspot")
    assert len(df) == 1660 and df.attrs["provenance"]["kernels"] == ["kt-hotspot"]
    assert df["repeats"].dtype == "Int64" and (df["repeats"] == 32).all()


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_readme_states_provenance_licence_units_and_counts(name) -> None:
    info = INFOS[name]
    text = info.readme_path.read_text()
    for word in ("**Source**", "**Licence**", "**Units**", "**Rows**", "commit", "datasets/build.py"):
        assert word in text, word
    assert f"{SHIPPED[name][0]:,}" in text
    prov = read_provenance(info.data_path)
    assert info.licence == prov["licence"] in ("MIT", "CC-BY-4.0")
    if info.licence == "MIT":  # MIT asks for the copyright and permission notice with every copy
        assert "Permission is hereby granted" in (info.path / "LICENSE").read_text()
    else:
        assert "Attribution (CC BY 4.0)" in text and "Paredes" in text


def test_no_gpl_source_is_shipped() -> None:
    gpl = ("deeptune", "pact14", "gpu-benches")
    for info in INFOS.values():
        text = info.readme_path.read_text().lower()
        assert "gpl" not in text and not any(g in text for g in gpl), info.name


def test_datasets_folder_stays_lean() -> None:
    total = sum(p.stat().st_size for p in datasets_dir().rglob("*") if p.is_file())
    assert total < 25 * 2**20, f"datasets/ is {total / 2**20:.1f} MiB"


def test_known_row_counts_per_gpu() -> None:
    gemm = load_dataset("kt-gemm-rtx")["gpu"].value_counts()
    assert gemm[stem("rtx-2080-ti")] == 17956 and gemm[stem("rtx-3060-laptop")] == 10000
    ns = load_dataset("neusight-gemm")
    assert (ns["config.op"] == "bmm").sum() == 87623 and (ns["config.op"] == "linear").sum() == 32224


def test_describe_shipped(described) -> None:
    rows = described
    uci = rows["uci-sgemm-gtx680"]
    # The UCI archive's own note: run-to-run CV median 0.2 %, p95 3 %.
    assert uci["noise_cv_median"] == pytest.approx(0.0021, abs=3e-4)
    assert uci["noise_cv_p95"] == pytest.approx(0.032, abs=3e-3)
    assert uci["licence"] == "CC-BY-4.0" and uci["rows"] == 241600 and "M=2048" in uci["sizes"]
    assert rows["titanv-seed004"]["noise_configs"] == 0
    assert rows["neusight-gemm"]["noise_configs"] == 0 and pd.isna(rows["neusight-gemm"]["noise_cv_median"])


def test_custom_root_discovery_and_errors(tmp_path) -> None:
    df = validate_sweep(pd.DataFrame({"kernel": ["seed004-matvec"] * 2, "gpu": [stem("titan-v")] * 2,
                                      "size.N": [1.0, 2.0], "time_ms": [1.0, 2.0], "repeats": [3, 3],
                                      "time_std_ms": [0.1, 0.1], "status": ["ok", "ok"]}))
    (tmp_path / "one").mkdir()
    write_sweep(df, tmp_path / "one" / "sweep.csv", provenance={"licence": "CC0"})
    (tmp_path / "one" / "README.md").write_text("# one: a tiny set\n")
    (tmp_path / "nodata").mkdir()
    (tmp_path / "nodata" / "README.md").write_text("# x\n")
    (tmp_path / "noreadme").mkdir()
    write_sweep(df, tmp_path / "noreadme" / "sweep.parquet")
    (tmp_path / "two").mkdir()
    write_sweep(df, tmp_path / "two" / "data.parquet")
    (tmp_path / "two" / "README.md").write_text("# two\n\n- **Licence**: MIT\n")
    infos = list_datasets(tmp_path)
    assert [(i.name, i.title, i.licence) for i in infos] == [("one", "one: a tiny set", "CC0"), ("two", "two", "MIT")]
    assert len(load_dataset("two", root=tmp_path)) == 2
    rows = describe_datasets(tmp_path)
    assert [r["name"] for r in rows] == ["one", "two"] and rows[0]["noise_cv_median"] == pytest.approx(0.075)
    with pytest.raises(SweepError, match="unknown dataset 'three'.*available: one, two"):
        load_dataset("three", root=tmp_path)
    assert list_datasets(tmp_path / "missing") == []


def test_environment_variable_moves_the_root(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("HYBRIDPERF_DATASETS", str(tmp_path))
    assert datasets_dir() == tmp_path and list_datasets() == []
