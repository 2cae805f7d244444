"""GPA's speedup estimators (paper Eqs. 2-10 as restated in GPA.md): pure functions of counts."""
from __future__ import annotations

import math
import numbers
from collections.abc import Iterable

from hybridperf.advise.gpa.arch import V100, GPAArch
from hybridperf.advise.gpa.errors import GPAParameterError

__all__ = [
    "block_increase_speedup",
    "issue_rate",
    "latency_hiding_speedup",
    "parallel_speedup",
    "scope_latency_hiding_speedup",
    "stall_elimination_speedup",
    "thread_increase_speedup",
]

# Counts come from exact fractions converted to float; allow for that rounding in the checks.
_TOL = 1e-9


def _check_total(total_samples: float) -> float:
    t = float(total_samples)
    if not math.isfinite(t) or t <= 0:
        raise GPAParameterError(f"total_samples must be a positive finite count, got {total_samples!r}")
    return t


def _check_range(name: str, value: float, low: float, high: float, scale: float = 1.0) -> float:
    # The tolerance follows the magnitudes the bounds were computed from (``scale``): a bound such as
    # T - A carries T's rounding error, not its own.
    v = float(value)
    tol = _TOL * max(1.0, abs(high), abs(scale))
    if not math.isfinite(v) or v < low - tol or v > high + tol:
        raise GPAParameterError(f"{name} must lie in [{low:g}, {high:g}], got {value!r}")
    return min(max(v, low), high)


def stall_elimination_speedup(total_samples: float, matched_samples: float | Iterable[float]) -> float:
    """Speedup if the matched stall samples are all eliminated (paper Eq. 2).

    S_s = T / (T - M), with T the kernel's total samples and M the optimizer's matched samples;
    an iterable of per-region matches M_k is summed first (GPA.md Sec. 1). Samples are counts
    (any consistent unit: the sampling period cancels). Returns ``math.inf`` when M = T.

    Source: Zhou et al., CGO 2021, Eq. 2; GPA.md Sec. 1.
    """
    t = _check_total(total_samples)
    if isinstance(matched_samples, numbers.Real):
        m_raw = float(matched_samples)
    else:
        parts = [float(m) for m in matched_samples]
        if any(m < 0 for m in parts):
            raise GPAParameterError(f"matched samples must be >= 0, got {parts}")
        m_raw = math.fsum(parts)
    m = _check_range("matched_samples", m_raw, 0.0, t)
    return math.inf if m >= t else t / (t - m)


def latency_hiding_speedup(total_samples: float, active_samples: float,
                           matched_latency_samples: float) -> float:
    """Speedup if matched latency samples are hidden under existing issue slots (Eqs. 3-4).

    S_l = T / (T - min(M_L, A)): reordering code can hide at most the A active samples (those
    taken while the scheduler issued); with M_L <= A this is Eq. 3, T / (T - M_L). Theorem 5.1:
    with L = T - A and M_L <= L, S_l <= 2.

    Source: Zhou et al., CGO 2021, Eqs. 3-4 and Theorem 5.1; GPA.md Sec. 2.
    """
    t = _check_total(total_samples)
    a = _check_range("active_samples", active_samples, 0.0, t)
    m = _check_range("matched_latency_samples", matched_latency_samples, 0.0, t - a, scale=t)
    return t / (t - min(m, a))


def scope_latency_hiding_speedup(total_samples: float, scopes: Iterable[tuple[float, float]],
                                 active_cap: float) -> float:
    """Kernel speedup of a latency-hiding optimizer from its scopes (paper Eq. 5, GPA.md Sec. 3).

    S = T / (T - min(A_cap, sum_s min(M_L^s, A^s))), where each scope s (loop or function)
    can hide at most its own active samples A^s, and ``active_cap`` bounds the total (the
    kernel's A, or for loop unrolling the active samples of same-loop pairs). The speedup of a
    single scope alone is ``latency_hiding_speedup``'s T / (T - min(M_L^s, A^s)) with the
    kernel's T. Bounded by 2 when A_cap <= A and sum_s M_L^s <= L (Theorem 5.1).

    Parameters
    ----------
    total_samples : float
        T, the kernel's total samples.
    scopes : iterable of (float, float)
        (M_L^s matched latency samples, A^s active samples) of each scope.
    active_cap : float
        A_cap, samples.
    """
    t = _check_total(total_samples)
    cap = _check_range("active_cap", active_cap, 0.0, t)
    hidden = 0.0
    for m, a in scopes:
        if m < 0 or a < 0:
            raise GPAParameterError(f"scope samples must be >= 0, got M_L={m!r}, A={a!r}")
        hidden += min(float(m), float(a))
    removed = min(cap, hidden)
    if removed >= t:
        raise GPAParameterError(
            f"hidden samples ({removed:g}) reach the total ({t:g}); the active cap must be <= A < T"
        )
    return t / (t - removed)


def issue_rate(issue_ratio: float, warps_per_scheduler: float) -> float:
    """Probability that a scheduler issues in a cycle (paper Eqs. 8-9).

    I = 1 - (1 - i)^W, with i the issued-sample ratio of one warp (samples with reason NONE
    over all samples) and W the active warps per scheduler; warps are assumed independent.

    Source: Zhou et al., CGO 2021, Eqs. 8-9; GPA.md Sec. 4.
    """
    i = _check_range("issue_ratio", issue_ratio, 0.0, 1.0)
    if not math.isfinite(warps_per_scheduler) or warps_per_scheduler < 0:
        raise GPAParameterError(f"warps_per_scheduler must be >= 0, got {warps_per_scheduler!r}")
    if warps_per_scheduler == 0 or i == 0.0:
        return 0.0
    # 1 - (1 - i)^W without cancellation, so tiny issue ratios keep their precision
    return -math.expm1(warps_per_scheduler * math.log1p(-i)) if i < 1.0 else 1.0


def parallel_speedup(issue_rate_change: float, warp_change: float, factor: float = 1.0) -> float:
    """Speedup of a parallel optimizer (paper Eq. 10): S_p = (delta_i / delta_w) * F.

    delta_i = I'/I is the change of the scheduler issue rate (Eq. 7), delta_w = W'/W the change
    of active warps per scheduler (Eq. 6), F an optimizer-specific factor. Time is proportional
    to warp instructions per scheduler over the issue rate, so T'/T = delta_w / delta_i.

    Source: Zhou et al., CGO 2021, Eqs. 6, 7, 10; GPA.md Sec. 4.
    """
    for name, v in (("issue_rate_change", issue_rate_change), ("warp_change", warp_change),
                    ("factor", factor)):
        if not math.isfinite(v) or v <= 0:
            raise GPAParameterError(f"{name} must be a positive finite number, got {v!r}")
    return issue_rate_change / warp_change * factor


def _check_launch(active_warps_per_sm: float, threads_per_block: int, arch: GPAArch) -> float:
    w = float(active_warps_per_sm)
    if not math.isfinite(w) or w <= 0 or w > arch.max_warps_per_sm:
        raise GPAParameterError(
            f"active_warps_per_sm must be in (0, {arch.max_warps_per_sm}] for {arch.name}, got "
            f"{active_warps_per_sm!r}"
        )
    if (not isinstance(threads_per_block, numbers.Integral) or isinstance(threads_per_block, bool)
            or threads_per_block < 1):
        raise GPAParameterError(f"threads_per_block must be a positive integer, got {threads_per_block!r}")
    return w


def block_increase_speedup(issue_ratio: float, active_warps_per_sm: float, threads_per_block: int,
                           blocks: int, throttle_ratio: float, *, arch: GPAArch = V100) -> float:
    """Block Increase: spread the same warps over more SMs, one warp per scheduler (GPA.md 4.1).

    Applies iff B < N_SM and n > S_sch * 32; otherwise returns 1.0 (not applicable). Then
    delta_w = S_sch / W_SM, delta_i = i / (1 - (1 - i)^floor(W_SM / S_sch)) (I' at one warp
    per scheduler is i; the floor is GPA's integer division) and F = 1 / (1 - r), with r the
    share of memory-throttle, not-selected and pipe-busy samples, assumed to vanish:

        S = [i / (1 - (1 - i)^floor(W_SM/S_sch))] * (W_SM / S_sch) / (1 - r_MTHR - r_NSEL - r_PIPE)

    Returns 1.0 also when i = 0, floor(W_SM/S_sch) = 0 or r >= 1 (the model is undefined).

    Parameters
    ----------
    issue_ratio : float
        i, issued samples / total samples.
    active_warps_per_sm : float
        W_SM, warps.
    threads_per_block : int
        n, threads.
    blocks : int
        B, blocks in the grid.
    throttle_ratio : float
        r_MTHR + r_NSEL + r_PIPE, fraction of all samples.

    Source: Zhou et al., CGO 2021, Eq. 10; GPA.md Sec. 4.1.
    """
    w = _check_launch(active_warps_per_sm, threads_per_block, arch)
    if not isinstance(blocks, numbers.Integral) or isinstance(blocks, bool) or blocks < 1:
        raise GPAParameterError(f"blocks must be a positive integer, got {blocks!r}")
    i = _check_range("issue_ratio", issue_ratio, 0.0, 1.0)
    r = _check_range("throttle_ratio", throttle_ratio, 0.0, 1.0)
    s_sch = arch.schedulers_per_sm
    if blocks >= arch.sm_count or threads_per_block <= s_sch * arch.warp_size:
        return 1.0
    k = int(w // s_sch)
    if k < 1 or i <= 0.0 or r >= 1.0:
        return 1.0
    delta_i = i / issue_rate(i, k)
    return parallel_speedup(delta_i, s_sch / w, 1.0 / (1.0 - r))


def thread_increase_speedup(issue_ratio: float, active_warps_per_sm: float, threads_per_block: int,
                            *, arch: GPAArch = V100) -> float:
    """Thread (occupancy) Increase: fill the schedulers up to full occupancy (GPA.md 4.2).

    beta = 32 * ceil(n / 32) / n rewards filling partial warps. If W_SM < S_sch some
    schedulers idle and S = (S_sch / W_SM) * beta; otherwise, with W = W_SM / S_sch and
    W' = W_max / S_sch,

        S = delta_i * beta = [1 - (1 - i)^W'] / [1 - (1 - i)^W] * beta

    (no delta_w term: the work per scheduler is unchanged). Returns 1.0 when i = 0, where GPA's
    code yields 0/0. Example (GPA.md): Fan2, n = 16 (beta = 2), W_SM = 32: S = 2 * (1 + (1-i)^8).

    Parameters
    ----------
    issue_ratio : float
        i, issued samples / total samples.
    active_warps_per_sm : float
        W_SM, warps.
    threads_per_block : int
        n, threads.

    Source: Zhou et al., CGO 2021, Eqs. 7-10; GPA.md Sec. 4.2.
    """
    w = _check_launch(active_warps_per_sm, threads_per_block, arch)
    i = _check_range("issue_ratio", issue_ratio, 0.0, 1.0)
    ws = arch.warp_size
    beta = ws * math.ceil(threads_per_block / ws) / threads_per_block
    s_sch = arch.schedulers_per_sm
    if w < s_sch:
        return s_sch / w * beta
    if i <= 0.0:
        return 1.0
    delta_i = issue_rate(i, arch.max_warps_per_sm / s_sch) / issue_rate(i, w / s_sch)
    return parallel_speedup(delta_i, 1.0, beta)
