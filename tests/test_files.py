"""Safe writes: one helper, refusing devices, symlinks and the command's inputs; temp files never left behind."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from hybridperf.errors import OutputError
from hybridperf.files import atomic_write, atomic_write_text, check_output, remove_temp_files, write_policy


def test_replaces_atomically_and_keeps_permissions(tmp_path: Path) -> None:
    target = tmp_path / "a.txt"
    target.write_text("old")
    atomic_write_text(target, "new")
    assert target.read_text() == "new"
    assert oct(target.stat().st_mode & 0o777) == oct(0o666 & ~_umask())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"]


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@pytest.mark.parametrize("make, message", [
    (lambda p: p.mkdir(), "is a directory"),
    (lambda p: os.mkfifo(p), "device, FIFO or socket"),
    (lambda p: os.symlink("elsewhere", p), "symbolic link"),
])
def test_refuses_non_regular_targets(tmp_path: Path, make, message: str) -> None:
    target = tmp_path / "t"
    make(target)
    with pytest.raises(OutputError, match=message):
        atomic_write_text(target, "x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t"]


def test_refuses_devices(tmp_path: Path) -> None:
    with pytest.raises(OutputError, match="device"):
        check_output("/dev/null")


def test_force_replaces_the_link_not_its_target(tmp_path: Path) -> None:
    real = tmp_path / "real.txt"
    real.write_text("keep")
    link = tmp_path / "link.txt"
    os.symlink(real.name, link)
    with write_policy(force=True):
        atomic_write_text(link, "new")
    assert real.read_text() == "keep" and not link.is_symlink() and link.read_text() == "new"


def test_refuses_the_commands_inputs_even_through_a_link(tmp_path: Path) -> None:
    data = tmp_path / "in.csv"
    data.write_text("a\n")
    os.symlink(data.name, tmp_path / "alias.csv")
    with write_policy([data], force=True):
        for target in (data, tmp_path / "alias.csv"):
            with pytest.raises(OutputError, match="also an input"):
                atomic_write_text(target, "x")
    assert data.read_text() == "a\n"


def test_missing_folder_and_failed_write_leave_nothing(tmp_path: Path) -> None:
    with pytest.raises(OutputError, match="does not exist"):
        atomic_write_text(tmp_path / "no" / "x.txt", "x")

    def fail(tmp: Path) -> None:
        tmp.write_text("partial")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        atomic_write(tmp_path / "x.txt", fail)
    assert list(tmp_path.iterdir()) == []


def test_remove_temp_files_cleans_writes_in_progress(tmp_path: Path) -> None:
    seen = []

    def write(tmp: Path) -> None:
        tmp.write_text("partial")
        seen.append(tmp)
        assert remove_temp_files() == 1  # what a signal handler does mid-write
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        atomic_write(tmp_path / "x.txt", write)
    assert not seen[0].exists() and list(tmp_path.iterdir()) == []


def test_a_folder_where_nothing_can_be_created_is_refused_before_the_work(tmp_path: Path) -> None:
    if os.geteuid() == 0:  # root ignores permission bits; sysfs still refuses new files
        folder = Path("/sys")
        if not folder.is_dir():
            pytest.skip("no /sys here and running as root: no folder refuses a new file")
    else:
        folder = tmp_path / "ro"
        folder.mkdir()
        folder.chmod(0o500)
    before = sorted(os.listdir(folder))
    with pytest.raises(OutputError, match="cannot create a file in"):
        check_output(folder / "model.json")
    assert sorted(os.listdir(folder)) == before
    assert check_output(tmp_path / "ok.json") == tmp_path / "ok.json"
    assert list(tmp_path.glob(".hybridperf-probe.*")) == []  # the probe is removed
