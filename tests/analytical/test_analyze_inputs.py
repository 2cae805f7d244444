"""analyze's inputs: lists and single values broadcast, a DataFrame's index kept, bad values refused by name, and a
launch of no blocks infeasible with its reason (it read "ok" with NaN times)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hybridperf.analytical.run import analyze
from hybridperf.errors import HybridperfError


def test_a_single_value_broadcasts_against_a_list() -> None:
    both = analyze("matvec", "a100", {"N": 4096, "BLOCK": [64, 128]}).summary()
    one_by_one = [analyze("matvec", "a100", {"N": 4096, "BLOCK": b}).summary() for b in (64, 128)]
    assert list(both["BLOCK"]) == [64, 128] and list(both["N"]) == [4096, 4096]
    np.testing.assert_allclose(both["hierarchical_ms"], [s["hierarchical_ms"].iloc[0] for s in one_by_one])


def test_a_dataframe_keeps_its_index() -> None:
    rows = pd.DataFrame({"N": [1024, 2048, 4096]}, index=[10, 11, 12])
    rows["hier"] = analyze("matvec", "a100", rows).summary()["hierarchical_ms"]
    assert rows["hier"].notna().all() and rows["hier"].is_monotonic_increasing


def test_no_rows_is_no_launch_and_no_parameters_one_launch_of_the_defaults() -> None:
    assert len(analyze("matvec", "a100", pd.DataFrame()).summary()) == 0
    assert len(analyze("matvec", "a100", {}).summary()) == 1


@pytest.mark.parametrize("params, kwargs, message", [
    ({"N": [1, 2, 3], "BLOCK": [64, 128]}, {}, r"parameter lists differ in length \(N: 3, BLOCK: 2\)"),
    ([1024, 64], {}, "params must be a mapping"),
    ({"N": "abc"}, {}, "parameter N: 'abc' is not a number"),
    (pd.DataFrame({"N": ["abc"]}), {}, "parameter N: 'abc' is not a number"),
    ({"N": [[1, 2], [3, 4]]}, {}, "parameter N: give a value or a flat list"),
    ({"N": 1024}, {"adjusting_weight": -1}, "adjusting_weight must be a positive number"),
    ({"N": 1024}, {"adjusting_weight": float("nan")}, "adjusting_weight must be a positive number"),
    ({"N": 1024}, {"models": ["roofline", "rooflin"]}, "unknown model 'rooflin'"),
])
def test_bad_parameters_are_named(params, kwargs, message: str) -> None:
    with pytest.raises(HybridperfError, match=message):
        analyze("matvec", "a100", params, **kwargs)


def test_one_model_by_name_is_that_model() -> None:
    cols = analyze("matvec", "a100", {"N": 4096}, models="roofline").summary().columns
    assert "roofline_ms" in cols and "hierarchical_ms" not in cols


def test_a_launch_of_no_blocks_is_infeasible_with_its_reason(tmp_path: Path) -> None:
    path = tmp_path / "part.toml"
    path.write_text("""format_version = 1
name = "test-partial"
[sizes]
N = { default = 4096, min = 1 }
[launch]
threads_per_block = "256"
blocks = "floor(N / 4096)"
registers_per_thread = "16"
smem_per_block_bytes = "0"
[counts]
comp_insts = "10"
coal_mem_insts = "2"
uncoal_mem_insts = "0"
dram_bytes = "8 * N"
""")
    s = analyze(str(path), "a100", {"N": [1024, 8192]}).summary()
    assert list(s["status"].str.startswith("ok")) == [False, True]
    assert "no blocks" in s["status"].iloc[0] and np.isnan(s["hierarchical_ms"].iloc[0])
    assert s["hierarchical_ms"].iloc[1] > 0


def test_the_value_that_is_no_number_is_the_one_named() -> None:
    with pytest.raises(HybridperfError, match="parameter N: 'big' is not a number"):
        analyze("matvec", "a100", pd.DataFrame({"N": [1024, "big"]}))
