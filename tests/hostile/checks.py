"""Expected outputs of the hostile suite's valid cases, checked against independent expectations."""
from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from hybridperf.cli import main
from hybridperf.files import file_sha256

Check = Callable[[dict[str, Any], dict[str, Any], Path], None]


def _json(result: dict[str, Any]) -> Any:
    return json.loads(result["stdout"])


def analyze_values(case: dict[str, Any], result: dict[str, Any], w: Path) -> None:
    rows = _json(result)["rows"]
    assert [r["params"]["N"] for r in rows] == [float(v) for v in case["values"]]


def analyze_param(case: dict[str, Any], result: dict[str, Any], w: Path) -> None:
    rows = _json(result)["rows"]
    assert [r["params"][case["param"]] for r in rows] == [float(v) for v in case["values"]]


def same_as_shipped(case: dict[str, Any], result: dict[str, Any], w: Path) -> None:
    """A copied spec or descriptor gives exactly what the shipped one gives."""
    argv = list(case["argv"])
    flag = case["shipped"][0]
    argv[argv.index(flag) + 1] = case["shipped"][1]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(argv) == 0
    assert _json(result) == json.loads(out.getvalue())


def _predictions(result: dict[str, Any]) -> list[dict[str, Any]]:
    rows = _json(result)["rows"]
    for r in rows:
        assert 0 < r["pred_lo_ms"] <= r["pred_ms"] <= r["pred_hi_ms"], r
    return rows


def predict_rows(case: dict[str, Any], result: dict[str, Any], w: Path) -> None:
    rows = _predictions(result)
    assert [r["size.N"] for r in rows] == [2048.0, 8192.0]
    assert rows[0]["pred_ms"] < rows[1]["pred_ms"]  # matvec does 16x the work


def predict_signed(case: dict[str, Any], result: dict[str, Any], w: Path) -> None:
    rows = _predictions(result)
    assert [r["size.N"] for r in rows] == [2048.0, 8192.0]


def predict_coverage(case: dict[str, Any], result: dict[str, Any], w: Path) -> None:
    doc = _json(result)
    assert doc["coverage"] == 0.5
    _predictions(result)


def imported_csv(case: dict[str, Any], result: dict[str, Any], w: Path) -> None:
    from hybridperf.sweepfile import read_sweep

    df = read_sweep(w / "out" / "csv_ok.parquet")
    assert df["size.N"].tolist() == [1024.0, 2048.0, 4096.0]
    assert df["config.BLOCK"].tolist() == [128, 128, 256]
    assert df["time_ms"].tolist() == [0.5, 0.9, 1.7]
    assert set(df["status"]) == {"ok"}


def imported_kt(case: dict[str, Any], result: dict[str, Any], w: Path) -> None:
    from hybridperf.sweepfile import read_sweep

    path = w / "out" / "kt_ok.csv"
    side = json.loads((w / "out" / "kt_ok.csv.meta.json").read_text())
    assert side["csv_sha256"] == file_sha256(path)
    df = read_sweep(path)
    cache = json.loads((w / "kt_ok.json").read_text())["cache"]
    assert len(df) == len(cache)  # one row per cached configuration, none dropped
    assert set(df["kernel"]) == {"kt-pnpoly"}


def kt_failed_row(case: dict[str, Any], result: dict[str, Any], w: Path) -> None:
    from hybridperf.sweepfile import read_sweep

    df = read_sweep(w / case["outputs"][0])
    cache = json.loads((w / case["source"]).read_text(), parse_constant=float)["cache"]
    assert len(df) == len(cache)
    first = df[(df["config.block_size_x"] == 32) & (df["config.tile_size"] == 1) & (df["config.between_method"] == 0)
               & (df["config.use_method"] == 0)]
    assert len(first) == 1 and first["status"].iloc[0] == "failed" and case["word"] in first["reason"].iloc[0]
    assert first["time_ms"].isna().all()


def uci_left_out(case: dict[str, Any], result: dict[str, Any], w: Path) -> None:
    """A negative run is left out of its row's median with a warning, never silently."""
    from hybridperf.sweepfile import read_sweep

    assert "hybridperf: warning:" in result["stderr"] and "1 run times <= 0" in result["stderr"]
    df = read_sweep(w / "out" / "uci_neg.parquet")
    first = df.iloc[0]
    assert first["repeats"] == 3 and first["time_ms"] == 115.87 and first["time_min_ms"] == 115.8


def forced_link(case: dict[str, Any], result: dict[str, Any], w: Path) -> None:
    link = w / "link.json"
    assert link.is_file() and not link.is_symlink()
    assert (w / "out" / "target.json").read_text() == "not overwritten\n"
    cache = json.loads(link.read_text())["cache"]
    assert len(cache) == len(pd.read_csv(w / "sweep_one.csv")) == 2


CHECKS: dict[str, Check] = {f.__name__: f for f in (analyze_values, analyze_param, same_as_shipped, predict_rows,
                                                     predict_signed, predict_coverage, imported_csv, imported_kt,
                                                     kt_failed_row, uci_left_out, forced_link)}
