"""The instruction blamer (paper Sec. 4) on the fixtures and on targeted in-memory cases."""
from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hybridperf.advise.gpa import GPAParameterError, apportion, blame_samples, read_samples

from .helpers import PLAIN_CASES, fixture, make_table


def blames_of(table, **kw):
    r = blame_samples(table, **kw)
    return r, {(b.src_pc, b.dst_pc, b.reason): b for b in r.blames}


# (case, src pc, dst pc, reason, label, all samples, latency samples)
EXPECTED = [
    ("raw_across_blocks", 0x10, 0x70, "GMEM", "GMEM_GMEM", 40, 32),
    ("raw_across_blocks", 0x20, 0x80, "IDEP", "IDEP_DEP", 10, 6),
    ("raw_across_blocks", 0x50, 0x60, "IDEP", "IDEP_DEP", 3, 2),
    ("raw_across_blocks", 0x90, 0x90, "IDEP", "IDEP_SCHE", 5, 4),
    ("raw_across_blocks", 0xA0, 0xA0, "NSEL", "NSEL", 4, 0),
    ("predicate", 0x30, 0x50, "GMEM", "GMEM_GMEM", 30, 20),
    ("predicate", 0x10, 0x50, "GMEM", "GMEM_CMEM", 30, 20),
    ("predicate", 0x60, 0x70, "IDEP", "IDEP_DEP", 12, 8),
    ("predicate", 0x40, 0x60, "IDEP", "IDEP_DEP", 4, 2),
    ("predicate", 0x90, 0xA0, "GMEM", "GMEM_GMEM", 9, 6),
    ("barrier", 0x00, 0x40, "GMEM", "GMEM_GMEM", 25, 20),
    ("barrier", 0x00, 0x60, "GMEM", "GMEM_GMEM", 7, 5),
    ("barrier", 0x10, 0x50, "IDEP", "IDEP_SMEM", 10, 8),
    ("barrier", 0x20, 0x30, "IDEP", "IDEP_DEP", 3, 2),
    ("war", 0x00, 0x20, "IDEP", "IDEP_WAR", 9, 7),
    ("war", 0x30, 0x40, "IDEP", "IDEP_WAR", 6, 4),
    ("war", 0x30, 0x50, "IDEP", "IDEP_SMEM", 5, 3),
    ("sync", 0x20, 0x30, "SYNC", "SYNC", 50, 45),
    ("sync", 0x50, 0x60, "SYNC", "SYNC", 20, 18),
    ("sync", 0x30, 0x40, "IDEP", "IDEP_SMEM", 12, 10),
    ("loop", 0x80, 0xA0, "GMEM", "GMEM_GMEM", 120, 100),
    ("loop", 0xB0, 0x80, "IDEP", "IDEP_DEP", 9, 7),
    ("loop", 0x90, 0xC0, "IDEP", "IDEP_DEP", 10, 6),
    ("loop", 0xC0, 0xD0, "IDEP", "IDEP_DEP", 8, 6),
]


@pytest.mark.parametrize(("case", "src", "dst", "reason", "label", "s", "lat"), EXPECTED)
def test_fixture_blame(case, src, dst, reason, label, s, lat):
    _, by = blames_of(read_samples(fixture(case)))
    b = by[(src, dst, reason)]
    assert (b.label, b.all_samples, b.latency_samples) == (label, s, lat)
    # no other instruction receives this instruction's stalls of this reason
    others = [k for k in by if k[1] == dst and k[2] == reason and k[0] != src]
    if case != "predicate" or dst != 0x50:
        assert others == []


def test_fixture_edges_and_distances():
    _, by = blames_of(read_samples(fixture("barrier")))
    assert by[(0x00, 0x40, "GMEM")].edges == {"wbar"}  # Fig. 3: the branch reads no register
    assert by[(0x10, 0x50, "IDEP")].edges == {"reg", "wbar"}
    _, by = blames_of(read_samples(fixture("war")))
    assert by[(0x00, 0x20, "IDEP")].edges == {"rbar", "war"}
    _, by = blames_of(read_samples(fixture("predicate")))
    assert by[(0x60, 0x70, "IDEP")].edges == {"pred"}
    assert (by[(0x10, 0x50, "GMEM")].distance, by[(0x30, 0x50, "GMEM")].distance) == (4, 2)
    _, by = blames_of(read_samples(fixture("raw_across_blocks")))
    assert by[(0x10, 0x70, "GMEM")].distance == 6  # the longest path, through block B
    assert by[(0x90, 0x90, "IDEP")].is_self


@pytest.mark.parametrize("case", PLAIN_CASES + ("ncu_loop",))
def test_blame_conserves_samples_exactly(case):
    t = read_samples(fixture(case))
    r = blame_samples(t)
    assert sum(b.all_samples for b in r.blames) == t.total_samples
    assert sum(b.latency_samples for b in r.blames) == t.latency_samples
    for rec in t.instructions:
        for reason in ("GMEM", "IDEP", "SYNC"):
            got = sum(b.all_samples for b in r.blames if b.dst_pc == rec.pc and b.reason == reason)
            assert got == rec.samples(reason)


def test_ncu_loop_blames_like_plain_loop():
    plain = blame_samples(read_samples(fixture("loop")))
    ncu_t = read_samples(fixture("ncu_loop"))
    base = ncu_t.instructions[0].pc
    ncu = blame_samples(ncu_t)
    key = lambda b: (b.src_pc, b.dst_pc, b.reason, b.label, b.all_samples, b.latency_samples)
    shifted = {(b.src_pc - base, b.dst_pc - base, *key(b)[2:]) for b in ncu.blames}
    assert shifted == {key(b) for b in plain.blames}


def test_dominator_rule_prunes_shadowed_source():
    # The unpredicated FADD at 0x10 reads R0 between the load and the use: it would have stalled
    # first, so the use's stall is not blamed on the load (paper Sec. 4, rule 2).
    t = make_table([("LDG.E R0, [R2]", 2, {}), ("FADD R4, R0, R0", 1, {"GMEM": (8, 8)}),
                    ("FADD R5, R0, R1", 1, {"GMEM": (6, 5)}), ("EXIT", 1, {})])
    _, by = blames_of(t)
    assert (0x00, 0x10, "GMEM") in by
    assert by[(0x20, 0x20, "GMEM")].label == "GMEM"  # unattributed: stays on the use


def test_predicated_reader_does_not_shadow():
    t = make_table([("LDG.E R0, [R2]", 2, {}), ("@P1 FADD R4, R0, R0", 1, {}),
                    ("FADD R5, R0, R1", 1, {"GMEM": (6, 5)}), ("EXIT", 1, {})])
    _, by = blames_of(t)
    assert by[(0x00, 0x20, "GMEM")].label == "GMEM_GMEM"


def test_idep_is_not_blamed_on_a_global_load():
    t = make_table([("LDG.E R0, [R2]", 2, {}), ("FADD R4, R0, R0", 1, {"IDEP": (3, 2)}), ("EXIT", 1, {})])
    _, by = blames_of(t)
    assert by[(0x10, 0x10, "IDEP")].label == "IDEP_SCHE"


def test_local_load_is_lmem_and_shared_store_not_gmem():
    t = make_table([("LDL R0, [R1+0x8]", 2, {}), ("FADD R4, R0, R0", 1, {"GMEM": (3, 2)}), ("EXIT", 1, {})])
    _, by = blames_of(t)
    assert by[(0x00, 0x10, "GMEM")].label == "GMEM_LMEM"


def test_loop_carried_dependence_on_itself():
    t = make_table([("MOV R6, RZ", 1, {}), ("FFMA R6, R4, R5, R6", 4, {"IDEP": (10, 8)}),
                    ("ISETP.NE.AND P0, PT, R7, RZ, PT", 1, {}), ("@P0 BRA 0x10", 1, {}), ("EXIT", 1, {})])
    _, by = blames_of(t)
    b = by[(0x10, 0x10, "IDEP")]
    assert b.edges == {"reg"} and not b.is_self and b.distance == 3
    # the initial MOV is 1 instruction away on the entry path: both share the stall (Eq. 1)
    assert by[(0x00, 0x10, "IDEP")].all_samples + b.all_samples == 10


def test_sync_on_a_barrier_stays_on_it_and_first_barrier_wins():
    t = make_table([("BAR.SYNC 0x0", 2, {"SYNC": (5, 5)}), ("MEMBAR.GL", 1, {}),
                    ("FADD R0, R1, R2", 1, {"SYNC": (7, 6)}), ("EXIT", 1, {})])
    _, by = blames_of(t)
    assert by[(0x00, 0x00, "SYNC")].is_self
    assert by[(0x10, 0x20, "SYNC")].all_samples == 7 and (0x00, 0x20, "SYNC") not in by


def test_search_step_cap_is_reported():
    t = read_samples(fixture("loop"))
    r = blame_samples(t, max_search_states=1)
    assert r.notes and "stopped after 1 states" in r.notes[0]
    assert sum(b.all_samples for b in r.blames) == t.total_samples


def test_single_dependency_coverage():
    assert blame_samples(read_samples(fixture("predicate"))).single_dependency_coverage == 0.75
    assert blame_samples(read_samples(fixture("loop"))).single_dependency_coverage == 1.0


def test_apportion_figure_4d():
    # LDC: twice LDG's issued samples and twice its path length -> equal blame
    assert apportion(60, [4, 2], [4, 2]) == (30, 30)
    assert apportion(9, [0, 3], [1, 1]) == (Fraction(9, 4), Fraction(27, 4))  # 0 issued -> weight 1


@given(st.integers(0, 10**6),
       st.lists(st.tuples(st.integers(0, 10**4), st.integers(1, 2000)), min_size=1, max_size=12))
def test_apportion_sums_exactly(count, sources):
    shares = apportion(count, [i for i, _ in sources], [d for _, d in sources])
    assert sum(shares) == count and all(s >= 0 for s in shares)


@given(st.integers(1, 1000), st.integers(1, 100), st.integers(1, 100), st.integers(1, 50))
def test_apportion_heuristics(count, issued, other, dist):
    more_issued = apportion(count, [issued + 1, other], [dist, dist])[0]
    assert more_issued >= apportion(count, [issued, other], [dist, dist])[0]
    longer = apportion(count, [issued, other], [dist + 1, dist])[0]
    assert longer <= apportion(count, [issued, other], [dist, dist])[0]


def test_apportion_errors():
    with pytest.raises(GPAParameterError):
        apportion(5, [], [])
    with pytest.raises(GPAParameterError):
        apportion(5, [1, 2], [1])
    with pytest.raises(GPAParameterError):
        apportion(-1, [1], [1])
    with pytest.raises(GPAParameterError):
        blame_samples(read_samples(fixture("war")), max_search_states=0)
