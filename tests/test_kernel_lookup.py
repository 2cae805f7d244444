"""Finding descriptors: registered, $HYBRIDPERF_KERNEL_PATH, the config file's kernel_path, then shipped."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hybridperf.errors import DescriptorError, HybridperfError, UnknownKernelError
from hybridperf.kernel import (
    KERNEL_PATH_ENV,
    kernel_key,
    kernel_names,
    load_kernel,
    parse_kernel_text,
    register_kernel,
    unregister_kernel,
)
from hybridperf.userconfig import CONFIG_ENV

MATVEC = Path(load_kernel("seed004-matvec").path).read_text()


def descriptor(name: str, comp: str = "2 * N") -> str:
    """The shipped matvec descriptor renamed (and with another comp_insts formula)."""
    return MATVEC.replace('name = "seed004-matvec"', f'name = "{name}"').replace(
        'aliases = ["matvec"]', "aliases = []").replace('comp_insts = "2 * N"', f'comp_insts = "{comp}"')


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    monkeypatch.delenv(KERNEL_PATH_ENV, raising=False)
    monkeypatch.setenv(CONFIG_ENV, str(tmp_path / "no-config.toml"))
    (tmp_path / "no-config.toml").write_text("")
    yield
    for name in ("mine", "seed004-matvec"):
        unregister_kernel(name)


def comp(desc) -> float:
    return float(desc.profile({"N": 100.0}).comp_insts[0])


def test_search_path_folder_and_file(tmp_path, monkeypatch) -> None:
    (tmp_path / "kern").mkdir()
    (tmp_path / "kern" / "a.toml").write_text(descriptor("mine"))
    (tmp_path / "other.toml").write_text(descriptor("mine-too", "3 * N"))
    with pytest.raises(UnknownKernelError, match="HYBRIDPERF_KERNEL_PATH"):
        load_kernel("mine")
    monkeypatch.setenv(KERNEL_PATH_ENV, f"{tmp_path / 'kern'}:{tmp_path / 'other.toml'}")
    assert comp(load_kernel("mine")) == 200 and comp(load_kernel("mine-too")) == 300
    assert {"mine", "mine-too", "seed004-matvec"} <= set(kernel_names())
    monkeypatch.setenv(KERNEL_PATH_ENV, str(tmp_path / "missing"))
    with pytest.raises(UnknownKernelError, match="search path entry .*missing.* does not exist"):
        load_kernel("mine")


def test_config_file_entries_are_relative_to_the_file(tmp_path, monkeypatch) -> None:
    (tmp_path / "conf" / "k").mkdir(parents=True)
    (tmp_path / "conf" / "k" / "mine.toml").write_text(descriptor("mine"))
    (tmp_path / "conf" / "config.toml").write_text('kernel_path = ["k"]\n')
    monkeypatch.setenv(CONFIG_ENV, str(tmp_path / "conf" / "config.toml"))
    assert comp(load_kernel("mine")) == 200
    (tmp_path / "conf" / "config.toml").write_text('kernel_paths = ["k"]\n')
    with pytest.raises(HybridperfError, match="unknown key 'kernel_paths'"):
        load_kernel("mine")
    monkeypatch.setenv(CONFIG_ENV, str(tmp_path / "nowhere.toml"))
    with pytest.raises(HybridperfError, match="no such file"):
        load_kernel("mine")


def test_precedence_registered_then_environment_then_config_then_shipped(tmp_path, monkeypatch) -> None:
    shipped = comp(load_kernel("seed004-matvec"))
    (tmp_path / "config.toml").write_text(f'kernel_path = ["{tmp_path / "c.toml"}"]\n')
    (tmp_path / "c.toml").write_text(descriptor("seed004-matvec", "5 * N"))
    (tmp_path / "e.toml").write_text(descriptor("seed004-matvec", "7 * N"))
    (tmp_path / "r.toml").write_text(descriptor("seed004-matvec", "11 * N"))
    monkeypatch.setenv(CONFIG_ENV, str(tmp_path / "config.toml"))
    assert comp(load_kernel("seed004-matvec")) == 500 != shipped
    monkeypatch.setenv(KERNEL_PATH_ENV, str(tmp_path / "e.toml"))
    assert comp(load_kernel("seed004-matvec")) == 700
    register_kernel(tmp_path / "r.toml")
    assert comp(load_kernel("seed004-matvec")) == 1100
    unregister_kernel("seed004-matvec")
    monkeypatch.delenv(KERNEL_PATH_ENV)
    monkeypatch.setenv(CONFIG_ENV, str(tmp_path / "no-config.toml"))
    assert comp(load_kernel("seed004-matvec")) == shipped


def test_rows_carry_the_name_where_the_name_finds_the_same_file(tmp_path) -> None:
    path = tmp_path / "mine.toml"
    path.write_text(descriptor("mine"))
    desc = load_kernel(str(path))
    assert kernel_key(desc) == str(path)  # nothing else answers to 'mine': the path is the identity
    register_kernel(path)
    assert kernel_key(desc) == "mine"
    path.write_text(descriptor("mine", "4 * N"))  # a different file of the same name
    assert kernel_key(load_kernel(str(path))) == str(path)
    assert kernel_key(load_kernel("seed004-matvec")) == "seed004-matvec"


def test_text_and_file_give_the_same_descriptor(tmp_path) -> None:
    path = tmp_path / "mine.toml"
    path.write_text(descriptor("mine"))
    a, b = load_kernel(str(path)), parse_kernel_text(path.read_text(), "test")
    assert a.sha256 == b.sha256 and a.text == b.text and b.path == ""
    np.testing.assert_array_equal(a.profile({"N": [10.0, 1e4]}).to_frame(), b.profile({"N": [10.0, 1e4]}).to_frame())
    with pytest.raises(DescriptorError, match="test: missing formula"):
        parse_kernel_text(path.read_text().replace('comp_insts = "2 * N"', ""), "test")


@pytest.mark.parametrize("name", ["a/b", "my.toml", "-x", "two words"])
def test_names_that_are_not_names_are_refused(tmp_path, name) -> None:
    path = tmp_path / "k.toml"
    path.write_text(descriptor(name))
    with pytest.raises(DescriptorError, match="must start with a letter or digit"):
        load_kernel(str(path))


def test_allowed_value_errors_stay_short(tmp_path) -> None:
    values = ", ".join(str(v) for v in range(1, 257))
    path = tmp_path / "k.toml"
    path.write_text(descriptor("mine").replace("values = [32, 64, 128, 256, 512, 1024]", f"values = [{values}]")
                    .replace("default = 256", "default = 256"))
    with pytest.raises(DescriptorError) as err:
        load_kernel(str(path)).profile({"BLOCK": 0.5})
    msg = str(err.value)
    assert "BLOCK=0.5 is not an allowed value" in msg and "(256 values)" in msg and len(msg) < 160


def test_gpu_search_path(tmp_path, monkeypatch) -> None:
    from hybridperf.hardware import GPU_PATH_ENV, gpu_names, load_gpu

    titan = load_gpu("titan-v")
    text = Path(titan.path).read_text().replace('name = "NVIDIA TITAN V"', 'name = "My Card"').replace(
        'aliases = ["titan-v", "titanv"]', "aliases = []")
    (tmp_path / "gpus").mkdir()
    (tmp_path / "gpus" / "my-card.toml").write_text(text)
    with pytest.raises(HybridperfError, match="HYBRIDPERF_GPU_PATH"):
        load_gpu("my-card")
    monkeypatch.setenv(GPU_PATH_ENV, str(tmp_path / "gpus"))
    spec = load_gpu("My Card")
    assert spec.key == "my-card" and "my-card" in gpu_names() and spec.sm_count == titan.sm_count
    assert load_gpu("titan-v") == titan


def test_a_spec_on_the_search_path_wins_over_a_shipped_file_of_the_same_stem(tmp_path, monkeypatch) -> None:
    from hybridperf.hardware import GPU_PATH_ENV, load_gpu

    t4 = load_gpu("tesla-t4")
    text = Path(t4.path).read_text().replace('name = "NVIDIA Tesla T4"', 'name = "My T4"')
    (tmp_path / "gpus").mkdir()
    (tmp_path / "gpus" / "tesla-t4.toml").write_text(text.replace('aliases = ["t4", "tesla-t4"]', "aliases = []"))
    monkeypatch.setenv(GPU_PATH_ENV, str(tmp_path / "gpus"))
    assert load_gpu("tesla-t4").name == "My T4" and load_gpu("t4") is t4  # the user's file has no alias t4
    monkeypatch.delenv(GPU_PATH_ENV)
    assert load_gpu("tesla-t4") is t4


@pytest.mark.parametrize("name", ["MatVec", "matvc"])
def test_an_unknown_kernel_name_close_to_one_names_it(name: str) -> None:
    with pytest.raises(UnknownKernelError, match=r"unknown kernel '\w+' \(did you mean 'matvec'\?\)"):
        load_kernel(name)


@pytest.mark.parametrize("name", ["zzqx", "neusight-conv"])
def test_a_name_close_to_none_gets_no_guess(name: str) -> None:
    """neusight-conv (a NeuSight op without a descriptor) is no neusight-bmm."""
    with pytest.raises(UnknownKernelError) as e:
        load_kernel(name)
    assert "did you mean" not in str(e.value)
