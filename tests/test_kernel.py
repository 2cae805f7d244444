"""Kernel descriptors: every shipped one evaluates; malformed ones give one-line errors."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hybridperf.errors import DescriptorError, FormulaError, UnknownKernelError
from hybridperf.kernel import list_kernels, load_kernel
from hybridperf.profile import PROFILE_FIELDS, KernelProfile


@pytest.mark.parametrize("kernel", list_kernels(), ids=lambda k: k.name)
def test_shipped_descriptor_evaluates_on_defaults(kernel) -> None:
    prof = kernel.profile({})
    assert len(prof) == 1
    for f in PROFILE_FIELDS:
        v = getattr(prof, f)
        assert np.isfinite(v).all() and (v >= 0).all(), f
    assert prof.threads_per_block[0] >= 1 and prof.blocks[0] >= 1


def test_seed_kernels_present() -> None:
    names = {k.name for k in list_kernels()}
    assert {"seed004-matvec", "seed004-dot", "seed004-vecadd", "seed004-matadd", "seed002-tiled-matmul"} <= names


def test_scalar_and_array_profiles_agree() -> None:
    k = load_kernel("seed002-tiled-matmul")
    sizes = np.array([256.0, 512.0, 1024.0])
    vec = k.profile({"N": sizes, "TILE": 16}).to_frame()
    for i, n in enumerate(sizes):
        one = k.profile({"N": n, "TILE": 16}).to_frame().iloc[0]
        np.testing.assert_allclose(one.to_numpy(), vec.iloc[i].to_numpy())


def test_tiled_matmul_reproduces_seed002_counting() -> None:
    # Seed 002 Sec. 3.6: inner loop once (TILE=1 worth of work) and 3 outer iterations -> 27 / 6 / 6.
    k = load_kernel("seed002-tiled-matmul")
    f = k.counts["comp_insts"]
    assert f({"N": 3.0, "TILE": 1.0}) == 27
    assert k.counts["uncoal_mem_insts"]({"N": 3.0, "TILE": 1.0}) == 6
    assert k.counts["sync_insts"]({"N": 3.0, "TILE": 1.0}) == 6


def test_constraints_and_space() -> None:
    k = load_kernel("seed002-tiled-matmul")
    ok, reasons = k.constraint_mask({"N": np.array([64.0, 100.0]), "TILE": 16})
    assert list(ok) == [True, False] and "N % TILE == 0" in reasons[1]
    assert k.space_size() == 4
    chunks = list(k.config_space(chunk_rows=3))
    assert [len(c) for c in chunks] == [3, 1]
    assert sorted(np.concatenate([c["TILE"].to_numpy() for c in chunks])) == [4, 8, 16, 32]


def test_bad_parameter_values() -> None:
    k = load_kernel("matvec")
    with pytest.raises(DescriptorError, match="unknown parameter 'M'"):
        k.profile({"M": 3})
    with pytest.raises(DescriptorError, match="BLOCK=300 is not an allowed value"):
        k.profile({"BLOCK": 300})
    with pytest.raises(DescriptorError, match="N must be >= 1"):
        k.profile({"N": 0})
    with pytest.raises(DescriptorError, match=r"N must be a whole number, got 1000000.5 \(a range with a fractional"):
        k.profile({"N": [1024, 1000000.5]})
    # Counts past the float range: the message names the field and the row, not a division by zero alone.
    with pytest.raises(DescriptorError, match=r"\[counts\]\.dram_bytes is not finite at N=1e\+200, BLOCK=256: "
                                              "a division by zero, or values too large"):
        k.profile({"N": [4096, 1e200]})


def test_integer_flag_of_parameters(tmp_path: Path) -> None:
    """Sizes are whole numbers unless the file says ``integer = false``; config parameters only where it says true."""
    p = tmp_path / "frac.toml"
    p.write_text(BASE.replace('N = { default = 4096, min = 1,', 'N = { default = 4096, min = 1, integer = false,')
                 .replace("default = 256,", "default = 256, integer = true,"))
    k = load_kernel(str(p))
    assert k.parameters["N"].integer is False and k.parameters["BLOCK"].integer is True
    assert k.profile({"N": 1.5}).blocks == 1.0
    assert load_kernel("matvec").parameters["N"].integer and not load_kernel("matvec").parameters["BLOCK"].integer
    p.write_text(BASE.replace("default = 4096, min = 1,", 'default = 4096, min = 1, integer = "yes",'))
    with pytest.raises(DescriptorError, match=r"\[sizes\]\.N\.integer must be true or false"):
        load_kernel(str(p))
    # A fractional default of a size is refused as the file is read, naming the fix (not at the first prediction).
    p.write_text(BASE.replace("default = 4096, min = 1,", "default = 0.5, min = 0,"))
    with pytest.raises(DescriptorError, match=r"\[sizes\]\.N takes whole numbers \(sizes do\), but its default or "
                                              r"values hold 0.5; declare integer = false"):
        load_kernel(str(p))


def test_unknown_kernel() -> None:
    with pytest.raises(UnknownKernelError, match="unknown kernel 'nope'"):
        load_kernel("nope")


BASE = Path(load_kernel("matvec").path).read_text()


@pytest.mark.parametrize("text, error, message", [
    (BASE.replace('comp_insts = "2 * N"', 'comp_insts = "2 * Q"'), FormulaError,
     r"\[counts\].comp_insts: unknown name 'Q'"),
    (BASE.replace('comp_insts = "2 * N"', 'comp_insts = "exp(N)"'), FormulaError, "unknown function 'exp'"),
    (BASE.replace('comp_insts = "2 * N"', 'comp_instz = "2 * N"'), DescriptorError,
     "unknown formula name 'comp_instz'"),
    (BASE.replace('blocks = "ceil(N / BLOCK)"\n', ""), DescriptorError, "missing formula launch.blocks"),
    (BASE.replace("format_version = 1", "format_version = 2"), DescriptorError, "format_version must be 1"),
    (BASE.replace("default = 256,", "default = 300,"), DescriptorError, "default 300 is not among its values"),
    (BASE + "\n[extra]\n", DescriptorError, "unknown top-level key 'extra'"),
    (BASE.replace("[sizes]", "[sizes\n"), DescriptorError, "not valid TOML"),
    (BASE.replace("[launch]", '[derived]\nN = "2"\n\n[launch]'), DescriptorError,
     r"\[derived\] name 'N' must be an identifier that is not a parameter"),
    (BASE.replace("[launch]", '[derived]\nbank_conflicts = "2 * N"\n\n[launch]'), DescriptorError,
     r"\[derived\] name 'bank_conflicts' must be .* not a parameter, launch key, count or formula function"),
    (BASE.replace("[sizes]\n", '[sizes]\nwhere = { default = 1 }\n'), DescriptorError,
     r"\[sizes\] parameter name 'where' must be an identifier that is not a formula function"),
    (BASE.replace("[launch]", '[derived]\nhalf = "twice / 4"\ntwice = "2 * N"\n\n[launch]'), FormulaError,
     r"\[derived\].half: unknown name 'twice'"),
])
def test_malformed_descriptor(tmp_path: Path, text: str, error: type, message: str) -> None:
    p = tmp_path / "bad.toml"
    p.write_text(text)
    with pytest.raises(error, match=message) as e:
        load_kernel(str(p))
    assert str(p) in str(e.value) and "\n" not in str(e.value)


def test_profile_from_values_defaults() -> None:
    p = KernelProfile.from_values(threads_per_block=128, blocks=80, registers_per_thread=0, smem_per_block_bytes=0,
                                  comp_insts=27, uncoal_mem_insts=6, coal_mem_insts=0)
    assert p.fp_insts[0] == 27 and p.uncoal_per_mw[0] == 32 and p.global_loads[0] == 6
    with pytest.raises(DescriptorError, match="missing"):
        KernelProfile.from_values(blocks=1)


def test_derived_quantities_feed_launch_and_counts(tmp_path: Path) -> None:
    text = BASE.replace("[launch]", '[derived]\ntwice = "2 * N"\nrows = "twice / 2"\n\n[launch]')
    text = text.replace('comp_insts = "2 * N"', 'comp_insts = "twice"').replace('blocks = "ceil(N / BLOCK)"',
                                                                                'blocks = "ceil(rows / BLOCK)"')
    p = tmp_path / "derived.toml"
    p.write_text(text)
    k, ref = load_kernel(str(p)), load_kernel("matvec")
    values = {"N": np.array([100.0, 5000.0]), "BLOCK": np.array([256.0, 256.0])}
    a, b = k.profile(values), ref.profile(values)
    for f in PROFILE_FIELDS:
        assert np.array_equal(getattr(a, f), getattr(b, f)), f
    # The solver checks constraints over parameters alone: a derived name there is refused, with the fix.
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace("[derived]", '[space]\nconstraints = ["BLOCK <= rows"]\n\n[derived]'))
    with pytest.raises(DescriptorError, match=r"constraints\[0\] uses the \[derived\] quantity 'rows'.*write its"):
        load_kernel(str(bad))


@pytest.mark.parametrize(("formula", "message"), [
    ("comp_insts + 1", r"\[counts\].comp_insts uses comp_insts, a count computed by this formula"),
    ("fp_insts + 1", r"\[counts\].comp_insts uses fp_insts, a count computed after it"),
])
def test_a_count_may_use_only_the_counts_before_it(tmp_path, formula: str, message: str) -> None:
    """Both compiled and then failed as "formula needs parameter 'comp_insts'; pass it (--set comp_insts=...)",
    which --set then refused as an unknown parameter."""
    from hybridperf.kernel import load_kernel

    path = tmp_path / "k.toml"
    path.write_text(f"""format_version = 1
name = "test-order"
[sizes]
N = {{ default = 1024, min = 1 }}
[launch]
threads_per_block = "256"
blocks = "ceil(N / 256)"
registers_per_thread = "16"
smem_per_block_bytes = "0"
[counts]
comp_insts = "{formula}"
coal_mem_insts = "2"
uncoal_mem_insts = "0"
fp_insts = "4"
dram_bytes = "8 * N"
""")
    with pytest.raises(DescriptorError, match=message):
        load_kernel(path)
    path.write_text(path.read_text().replace(f'comp_insts = "{formula}"', 'comp_insts = "10"').replace(
        'fp_insts = "4"', 'fp_insts = "comp_insts / 2"'))
    assert load_kernel(path).profile({"N": 1024}).fp_insts == 5


def test_a_value_listed_twice_is_refused(tmp_path) -> None:
    """values = [256, 256, 256] enumerated, ranked and suggested the same configuration three times."""
    from tests.paths import edited_descriptor

    path = edited_descriptor(tmp_path, "matvec", "values = [32, 64, 128, 256, 512, 1024]",
                             "values = [32, 64, 256, 256]")
    with pytest.raises(DescriptorError, match=r"\[config\].BLOCK.values lists 256 more than once"):
        load_kernel(path)
