"""The training domain and the reasons a row lies outside it."""
from __future__ import annotations

import pandas as pd

from hybridperf.learn.domain import outside_reasons, training_domain


def _rows(**cols) -> pd.DataFrame:
    return pd.DataFrame(cols)


def test_domain_records_gpus_size_ranges_and_config_values() -> None:
    train = _rows(kernel=["k", "k", "k"], gpu=["a", "a", "b"], **{"size.N": [64.0, 256.0, 128.0],
                                                                   "config.B": [32.0, 64.0, 32.0]})
    d = training_domain(train)
    assert d == {"k": {"gpus": ["a", "b"], "size.N": [64.0, 256.0], "config.B": [32.0, 64.0]}}


def test_reasons_name_the_kernel_gpu_size_and_config() -> None:
    d = training_domain(_rows(kernel=["k"] * 3, gpu=["a"] * 3, **{"size.N": [64.0, 128.0, 256.0],
                                                                  "config.B": [32.0, 64.0, 128.0]}))
    probe = _rows(kernel=["k", "k", "k", "k", "other"], gpu=["a", "a", "z", "a", "a"],
                  **{"size.N": [128.0, 1024.0, 128.0, 128.0, 128.0], "config.B": [64.0, 64.0, 64.0, 48.0, 64.0]})
    why = outside_reasons(probe, d)
    assert why[0] == ""
    assert "N 1024 outside trained 64..256" in why[1]
    assert "GPU z never trained" in why[2]
    assert "B 48 never trained" in why[3]
    assert why[4] == "kernel other never trained"


def test_a_long_config_list_is_stored_as_a_range() -> None:
    train = _rows(kernel=["k"] * 300, gpu=["a"] * 300, **{"config.B": [float(i) for i in range(300)]})
    d = training_domain(train)
    assert d["k"]["config.B"] == [0.0, 299.0]
    why = outside_reasons(_rows(kernel=["k", "k"], gpu=["a", "a"], **{"config.B": [150.5, 400.0]}), d)
    assert why == ["", "B 400 never trained"]
