"""Reading inputs within limits: regular files only, sizes first, gzip streamed with a cap, CSV headers checked."""
from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest

from hybridperf.errors import InputError, LimitError
from hybridperf.inputs import check_csv_table, check_json_size, gunzip, read_input
from hybridperf.limits import max_input_bytes


def test_gunzip_multi_member_and_padding() -> None:
    data = os.urandom(300_000) + b"x" * 2_000_000
    members = gzip.compress(data) + gzip.compress(b"tail")
    assert gunzip(members + b"\0\0", 10**8, "f") == data + b"tail" == gzip.decompress(members)


@pytest.mark.parametrize("cut", [5, 100])
def test_gunzip_truncated_is_refused(cut: int) -> None:
    with pytest.raises(InputError, match="truncated"):
        gunzip(gzip.compress(os.urandom(5000))[:-cut], 10**8, "f")


def test_gunzip_stops_at_the_limit() -> None:
    bomb = gzip.compress(b"\0" * (8 << 20))
    with pytest.raises(LimitError, match="more than 1 MiB"):
        gunzip(bomb, 1 << 20, "bomb")


def test_read_input_refuses_special_and_big_files(tmp_path: Path, monkeypatch) -> None:
    with pytest.raises(InputError, match="is a device"):
        read_input("/dev/zero")
    with pytest.raises(InputError, match="is a directory"):
        read_input(tmp_path)
    os.mkfifo(tmp_path / "f")
    with pytest.raises(InputError, match="FIFO"):
        read_input(tmp_path / "f")
    monkeypatch.setenv("HYBRIDPERF_MAX_INPUT_MB", "1")
    assert max_input_bytes() == 1 << 20
    big = tmp_path / "big.csv"
    with open(big, "wb") as fh:
        fh.truncate(2 << 20)
    with pytest.raises(LimitError, match="HYBRIDPERF_MAX_INPUT_MB"):
        read_input(big)
    monkeypatch.setenv("HYBRIDPERF_MAX_INPUT_MB", "nan")
    assert max_input_bytes() == 64 << 20


def test_csv_header_and_cells() -> None:
    check_csv_table(b"a,b\n1,2\n", "f")
    with pytest.raises(InputError, match="'a' appears twice"):
        check_csv_table(b"a,b,a\n1,2,3\n", "f")
    with pytest.raises(LimitError, match="cells"):
        check_csv_table(b"a,b\n" + b"1,2\n" * 100, "f", max_cells=50)


def test_json_container_count() -> None:
    check_json_size(b"[[], {}]", "f", max_containers=3)
    with pytest.raises(LimitError, match="objects/arrays"):
        check_json_size("[" * 5, "f", max_containers=4)
