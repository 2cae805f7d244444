"""Per-row checks: invalid rows are counted and grouped by reason, skipped with a warning or refused with strict."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hybridperf.errors import HybridperfError
from hybridperf.rowcheck import check_rows, drop_bad_rows


def rows() -> pd.DataFrame:
    # seed004-matvec: N >= 1, BLOCK in 32..1024 (powers of two); BLOCK has a default (the empty cell of the last
    # row takes it), N too (but an empty size cell is refused: test_an_empty_size_or_a_text_value_is_refused).
    return pd.DataFrame({
        "kernel": ["seed004-matvec"] * 6 + ["nope", "seed004-matvec"],
        "gpu": ["titan-v"] * 5 + ["gtx-9999", "titan-v", "titan-v"],
        "size.N": [1024, 0, 2048, 4096, 8192, 1024, 1, 512],
        "config.BLOCK": [256, 256, 300, 100, 128, 64, 32, np.nan],
    })


def test_reasons_are_grouped_and_counted() -> None:
    check = check_rows(rows())
    np.testing.assert_array_equal(check.ok, [True, False, False, False, True, False, False, True])
    reasons = list(check.reasons)
    assert reasons[1] == "seed004-matvec: N is below its minimum 1"
    assert reasons[2] == reasons[3] == "seed004-matvec: BLOCK is not an allowed value"
    assert reasons[5].startswith("runs on a GPU without a spec") and "unknown kernel 'nope'" in reasons[6]
    assert check.examples[reasons[5]] == " (gtx-9999)"
    line = check.summary()
    assert line.startswith("5 of 8 rows are invalid: 2 x seed004-matvec: BLOCK is not an allowed value (e.g. 300)")
    assert "\n" not in line and len(line) < 400


def test_skipped_with_a_warning_or_refused_when_strict() -> None:
    with pytest.warns(UserWarning, match=r"5 of 8 rows are invalid: .*; skipped them \(pass --strict to stop"):
        kept = drop_bad_rows(rows())
    assert list(kept.index) == [0, 4, 7]
    with pytest.raises(HybridperfError, match="5 of 8 rows are invalid"):
        drop_bad_rows(rows(), strict=True)
    with pytest.raises(HybridperfError, match="nothing left to use"):
        drop_bad_rows(rows().iloc[[1, 2]])


def test_an_empty_size_or_a_text_value_is_refused() -> None:
    """Both took the descriptor's default before (N = 4096, BLOCK = 256): a training run at the wrong size, a
    config 'big' ranked as BLOCK = 256. An empty config cell still takes its default (importers leave a
    parameter a source did not vary empty; predictions flag it as defaulted)."""
    table = pd.DataFrame({"kernel": "seed004-matvec", "gpu": "titan-v", "size.N": [1024, np.nan, 2048, "4096"],
                          "config.BLOCK": [256, 256, "big", np.nan]})
    check = check_rows(table)
    assert list(check.ok) == [True, False, False, True]
    assert check.reasons[1] == ("seed004-matvec: N is empty (a size is never taken from the descriptor's "
                                "default)")
    assert check.reasons[2] == "seed004-matvec: BLOCK is not a number"
    # a size column no row of the kernel fills is absent for it (a sweep without sizes merged with one with them)
    merged = pd.concat([table.iloc[[0]].assign(kernel="seed004-dot"), table.iloc[[0]].drop(columns="size.N")])
    assert list(check_rows(merged.reset_index(drop=True)).ok) == [True, True]


def test_without_names_only_known_kernels_parameters_are_checked() -> None:
    check = check_rows(rows(), names=False)
    assert list(np.flatnonzero(~check.ok)) == [1, 2, 3]


@pytest.mark.parametrize(("value", "rule"), [(np.inf, "finite"), (0.0, "min"), (600.0, "max"), (2.5, "integer"),
                                             (3.0, "values"), (4.0, "")])
def test_row_checks_and_descriptor_resolution_agree_on_each_rule(value: float, rule: str) -> None:
    """A value a row check marks is one resolving refuses, for the same rule, and a value one passes the other
    passes (both read Param.broken); each rule checked against its plain definition."""
    from hybridperf.descriptor import KernelDescriptor, Param
    from hybridperf.errors import DescriptorError

    p = Param("X", default=4.0, values=(1.0, 2.0, 4.0, 2.5, 600.0, 0.0), min=1.0, max=512.0, integer=True)
    finite = bool(np.isfinite(value))
    expected = {"finite": not finite, "min": finite and value < 1, "max": finite and value > 512,
                "integer": finite and value != round(value), "values": finite and value not in p.values}
    marked = [r for mask, r in p.broken(np.array([value])) if mask[0]]
    assert marked == [r for r in ("finite", "min", "max", "integer", "values") if expected[r]]
    desc = KernelDescriptor(name="k", sizes=(p,), config=(), launch={}, counts={})
    row = pd.DataFrame({"kernel": ["k"], "gpu": ["titan-v"], "size.X": [value]})
    check = check_rows(row, {"k": desc})
    if not rule:
        assert check.ok[0]
        desc.resolve({"X": value})
        return
    word = {"finite": "finite", "min": "minimum", "max": "maximum", "integer": "whole", "values": "allowed"}[rule]
    assert not check.ok[0] and word in check.reasons[0]
    with pytest.raises(DescriptorError, match={"finite": "finite", "min": ">=", "max": "<=", "integer": "whole",
                                               "values": "allowed value"}[rule]):
        desc.resolve({"X": value})
