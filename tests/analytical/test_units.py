"""Every term analyze reports has a unit, and units agree with what the names say."""
from __future__ import annotations

from hybridperf.analytical.run import MODELS, analyze
from hybridperf.analytical.units import TERM_UNITS, term_unit

SUFFIXES = {"_ms": "ms", "_cycles": "cycles", "_gbs": "GB/s", "_bytes": "B"}


def test_every_term_of_every_model_has_a_unit() -> None:
    res = analyze("tiled-matmul", "titan-v", {"N": [1024, 2048], "TILE": [16, 16]}, models=list(MODELS))
    for model, frame in res.terms.items():
        assert set(frame.columns) == set(TERM_UNITS[model]), model  # a new term needs a unit here
        for term in frame.columns:
            unit = term_unit(model, term)
            assert unit, (model, term)
            for suffix, expected in SUFFIXES.items():
                if term.endswith(suffix):
                    assert unit == expected, (model, term, unit)
    assert term_unit("gpuperf", "nope") == ""


def test_terms_that_are_times_in_cycles_add_up() -> None:
    """GPUPerf's T_exec = T_comp + T_mem - T_overlap (Sim et al. Eq. 1): the three share the unit of T_exec."""
    res = analyze("matvec", "a100", {"N": [4096]}, models=["gpuperf"])
    row = res.terms["gpuperf"].iloc[0]
    assert abs(row.t_comp + row.t_mem - row.t_overlap - row.t_exec) <= 1e-9 * row.t_exec
    assert {term_unit("gpuperf", t) for t in ("t_comp", "t_mem", "t_overlap", "t_exec")} == {"cycles"}
