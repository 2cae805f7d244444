"""The sweep table: validation at the boundary, atomic readers/writers, summary and noise floor."""
from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pytest

from hybridperf.errors import HybridperfError, SweepError
from hybridperf.sweep import noise_floor, param_columns, summarize_sweep, validate_sweep
from hybridperf.sweepfile import read_provenance, read_sweep, write_sweep
from tests.paths import REPO, stem

GPU = stem("titan-v")
KNOWN = {"known_kernels": ["seed004-matvec", "k"], "known_gpus": [GPU]}


def sweep(**extra) -> pd.DataFrame:
    df = pd.DataFrame({
        "kernel": ["k", "k", "k", "k"], "gpu": [GPU] * 4, "size.N": [1024.0, 1024, 2048, 2048],
        "config.BLOCK": [128, 256, 128, 256], "time_ms": [1.0, 2.0, np.nan, 4.0],
        "repeats": [3, 3, pd.NA, 3], "time_std_ms": [0.01, 0.02, np.nan, 0.4],
        "time_min_ms": [0.99, 1.9, np.nan, 3.8], "time_max_ms": [1.01, 2.1, np.nan, 4.5],
        "status": ["ok", "ok", "failed", "ok"], "reason": ["", "", "CompilationFailedConfig", ""],
    })
    for k, v in extra.items():
        df[k] = v
    return df


def error(df: pd.DataFrame, **kw) -> str:
    with pytest.raises(SweepError) as info:
        validate_sweep(df, source="runs.csv", **{**KNOWN, **kw})
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith("runs.csv: ")
    assert isinstance(info.value, HybridperfError) and isinstance(info.value, ValueError)
    return msg


def test_valid_sweep_is_normalised() -> None:
    df = sweep(**{"config.FLAG": [True, False, True, False], "counter.regs": [32, 32, 40, 40]})
    out = validate_sweep(df.drop(columns="reason").assign(reason=["", "", "x", ""]), **KNOWN)
    assert out["repeats"].dtype == "Int64" and out["repeats"].isna().sum() == 1
    assert out["config.FLAG"].tolist() == [1, 0, 1, 0]
    assert list(out.columns[:4]) == ["kernel", "gpu", "size.N", "config.BLOCK"]
    assert out.columns[-1] == "counter.regs"


def test_optional_columns_are_added() -> None:
    df = sweep().drop(columns=["repeats", "reason", "time_std_ms", "time_min_ms", "time_max_ms"])
    df["status"] = "ok"
    df.loc[2, "time_ms"] = 3.0
    out = validate_sweep(df, **KNOWN)
    assert out["reason"].tolist() == [""] * 4 and out["repeats"].isna().all()


@pytest.mark.parametrize(("change", "words"), [
    (lambda d: d.drop(columns="status"), ["missing column 'status'"]),
    (lambda d: d.assign(foo=1), ["unknown column 'foo'", "config.<name>"]),
    (lambda d: d.assign(**{"size.": 1}), ["unknown column 'size.'"]),
    (lambda d: d.assign(kernel=["k", None, "k", "k"]), ["'kernel'", "1 rows", "data row 2"]),
    (lambda d: d.assign(status=["ok", "done", "failed", "ok"]), ["invalid status 'done'", "ok, failed, invalid"]),
    (lambda d: d.assign(time_ms=[1.0, -2.0, np.nan, 4.0]), ["non-positive time_ms on ok rows", "1 rows"]),
    (lambda d: d.assign(time_ms=[1.0, np.nan, np.nan, 4.0]), ["time_ms on ok rows"]),
    (lambda d: d.assign(time_ms=["1", "x", None, "4"]), ["non-numeric values in column 'time_ms'", "'x'"]),
    (lambda d: d.assign(reason=["oops", "", "x", ""]), ["'reason' is set on ok rows"]),
    (lambda d: d.assign(reason=["", "", "", ""]), ["without a reason"]),
    (lambda d: d.assign(repeats=[0, 3, None, 3]), ["repeats must be a whole number"]),
    (lambda d: d.assign(time_min_ms=[1.5, 1.9, np.nan, 3.8]), ["outside [time_min_ms, time_max_ms]"]),
    (lambda d: d.assign(time_std_ms=[-1, 0, np.nan, 0]), ["'time_std_ms'"]),
    (lambda d: d.assign(**{"config.BLOCK": [128, "x", 128, 256]}), ["mixes numbers and strings"]),
    (lambda d: d.assign(**{"size.N": ["a", "b", "c", "d"]}), ["non-numeric values in column 'size.N'"]),
    (lambda d: d.assign(**{"size.N": [1.0, np.inf, 1, 1]}), ["infinite values in 'size.N'"]),
    (lambda d: d.assign(**{"config.BLOCK": 128}), ["duplicate configurations", "4 rows", "merge repeats"]),
    (lambda d: d.iloc[:0], ["no rows"]),
])
def test_each_problem_gives_one_clear_error(change, words) -> None:
    msg = error(change(sweep()))
    for w in words:
        assert w in msg, msg


def test_unknown_and_alias_names() -> None:
    assert "unknown GPU 'gtx-9999'" in error(sweep(gpu="gtx-9999"))
    assert "known_gpus" in error(sweep(gpu="gtx-9999"))
    msg = error(sweep(gpu="titanv"), known_gpus=[GPU])
    assert "alias" in msg and repr(GPU) in msg
    assert "unknown kernel 'nope'" in error(sweep(kernel="nope"))
    # Default lists: the shipped kernel descriptors.
    with pytest.raises(SweepError, match="unknown kernel 'k'"):
        validate_sweep(sweep())
    assert len(validate_sweep(sweep(kernel="seed004-matvec"))) == 4


def test_not_a_dataframe() -> None:
    with pytest.raises(SweepError, match="expected a pandas DataFrame"):
        validate_sweep([1, 2, 3])  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["runs.parquet", "runs.csv", "runs.csv.gz"])
def test_write_read_roundtrip_with_provenance(tmp_path, name) -> None:
    df = sweep(**{"info.note": ["a", "b", "c", "d"], "config.kind": ["x", "y", "x", "y"]})
    prov = {"source_repo": "example/repo", "commit": "abc", "licence": "MIT", "units": {"time_ms": "ms"}}
    path = write_sweep(validate_sweep(df, **KNOWN), tmp_path / name, provenance=prov)
    back = read_sweep(path, **KNOWN)
    assert back.attrs["provenance"] == prov == read_provenance(path)
    pd.testing.assert_frame_equal(back, validate_sweep(df, **KNOWN), check_dtype=False, check_like=False)
    assert back["repeats"].dtype == "Int64"
    if name.startswith("runs.csv"):
        side = json.loads((tmp_path / f"{name}.meta.json").read_text())
        assert side["sweep_format"] == 1
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_read_titanv_seed004_of_the_lead() -> None:
    df = read_sweep(REPO / "datasets" / "titanv-seed004" / "sweep.csv")
    assert len(df) == 78 and (df["status"] == "ok").all() and df.attrs["provenance"] == {}


def test_failed_write_leaves_no_partial_file(tmp_path, monkeypatch) -> None:
    import pyarrow.parquet as pq

    target = tmp_path / "out.parquet"
    write_sweep(validate_sweep(sweep(), **KNOWN), target)
    before = target.read_bytes()

    def broken(table, where, **kw):
        with open(where, "wb") as f:
            f.write(b"PAR1 half a file")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pq, "write_table", broken)
    with pytest.raises(SweepError, match="cannot write .*No space left"):
        write_sweep(validate_sweep(sweep(), **KNOWN), target)
    assert target.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["out.parquet"]


def test_write_refuses_bad_input_before_touching_disk(tmp_path) -> None:
    with pytest.raises(SweepError, match="duplicate"):
        write_sweep(sweep(**{"config.BLOCK": 1}), tmp_path / "x.parquet")
    with pytest.raises(SweepError, match="unknown sweep file type"):
        write_sweep(sweep(), tmp_path / "x.xlsx")
    with pytest.raises(SweepError, match="does not exist"):
        write_sweep(sweep(), tmp_path / "nope" / "x.csv")
    with pytest.raises(SweepError, match="JSON-serialisable"):
        write_sweep(sweep(), tmp_path / "x.csv", provenance={"bad": float("nan")})
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("name", "content", "words"), [
    ("a.csv", b"", "empty"),
    ("a.csv", b"kernel,gpu\n", "no rows"),
    ("a.parquet", b"not parquet at all", "cannot parse as parquet"),
    ("a.csv", b'kernel,gpu,time_ms,status\n"k,\n', "cannot parse as csv"),
    ("a.json", b"{}", "unknown sweep file type"),
])
def test_read_errors(tmp_path, name, content, words) -> None:
    (tmp_path / name).write_bytes(content)
    with pytest.raises(SweepError, match=words):
        read_sweep(tmp_path / name)
    with pytest.raises(SweepError, match="no such file"):
        read_sweep(tmp_path / "missing.csv")


def test_bad_sidecar(tmp_path) -> None:
    path = write_sweep(validate_sweep(sweep(), **KNOWN), tmp_path / "a.csv")
    (tmp_path / "a.csv.meta.json").write_text("[1, 2")
    with pytest.raises(SweepError, match="cannot read provenance"):
        read_sweep(path, **KNOWN)


def test_summary_and_noise_floor() -> None:
    df = validate_sweep(sweep(**{"config.kind": ["x", "y", "x", "y"]}), **KNOWN)
    s = summarize_sweep(df)
    assert (s.rows, s.ok, s.failed, s.invalid) == (4, 3, 1, 0)
    assert s.sizes == {"N": (1024.0, 2048.0, 2)} and s.configs["BLOCK"] == (128.0, 256.0, 2)
    assert np.isnan(s.configs["kind"][0]) and s.configs["kind"][2] == 2
    assert s.time_ms == (1.0, 2.0, 4.0) and s.kernels == ("k",) and s.gpus == (GPU,)
    assert json.dumps(s.to_dict())
    nf = noise_floor(df)
    cv = [0.01, 0.01, 0.1]
    assert nf["configs"] == 3 and nf["cv_median"] == pytest.approx(np.median(cv))
    assert nf["cv_p95"] == pytest.approx(np.quantile(cv, 0.95)) and nf["per_gpu"][GPU]["configs"] == 3
    assert noise_floor(df, min_repeats=4)["configs"] == 0
    assert param_columns(df, "config.") == ["config.BLOCK", "config.kind"]
    with pytest.raises(SweepError):
        param_columns(df, "cfg.")


def test_temp_files_are_hidden_and_cleaned(tmp_path) -> None:
    write_sweep(validate_sweep(sweep(), **KNOWN), tmp_path / "a.parquet")
    assert os.listdir(tmp_path) == ["a.parquet"]


@pytest.mark.parametrize("convert", [lambda t: pd.to_timedelta(t, unit="ms"), lambda t: pd.to_datetime(t, unit="ms")])
def test_durations_and_dates_are_no_times(convert) -> None:
    """A Parquet time_ms stored as a duration read as integer nanoseconds: 10^6x too slow, trained with exit 0."""
    from hybridperf.datasets import load_dataset

    runs = load_dataset("titanv-seed004").head(5)
    with pytest.raises(SweepError, match="column 'time_ms' holds (durations|dates), not numbers"):
        validate_sweep(runs.assign(time_ms=convert(runs["time_ms"])))


@pytest.mark.parametrize("time_ms", [1e-300, 1e300, 5e-7])
def test_times_no_kernel_takes_are_refused(time_ms: float) -> None:
    """1e-300 ms trained and then failed to save ("transfer_offset_: -688.58 is less than the minimum of -100")."""
    from hybridperf.datasets import load_dataset

    runs = load_dataset("titanv-seed004").head(5)
    with pytest.raises(SweepError, match=r"time_ms outside 1e-06 \.\. 1e\+08 ms .* check the unit"):
        validate_sweep(runs.assign(time_ms=[time_ms] + list(runs["time_ms"].iloc[1:])))


def test_a_sweep_of_another_format_version_is_refused(tmp_path) -> None:
    """A sidecar saying sweep_format 2 was read as format 1."""
    from hybridperf.datasets import load_dataset

    path = write_sweep(load_dataset("titanv-seed004").head(3), tmp_path / "s.csv")
    side = tmp_path / "s.csv.meta.json"
    doc = json.loads(side.read_text())
    side.write_text(json.dumps({**doc, "sweep_format": 2}))
    with pytest.raises(SweepError, match="sweep_format 2, this hybridperf reads 1"):
        read_sweep(path)
