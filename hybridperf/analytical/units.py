"""The unit of every term the analytical models report (analyze --terms shows them beside the values)."""
from __future__ import annotations

__all__ = ["TERM_UNITS", "term_unit"]

_C, _W, _F, _N = "cycles", "warps", "fraction", "-"
# model -> term -> unit. Cycles are core clock cycles; "-" is a dimensionless number or a label.
TERM_UNITS: dict[str, dict[str, str]] = {
    "occupancy": {"warps_per_block": _W, "blocks_by_warps": "blocks", "blocks_by_registers": "blocks",
                  "blocks_by_smem": "blocks", "blocks_by_limit": "blocks", "active_blocks_per_sm": "blocks",
                  "active_warps_per_sm": _W, "active_threads_per_sm": "threads", "occupancy": _F, "limiter": _N,
                  "feasible": _N, "reason": _N},
    # Hong & Kim (ISCA 2009), Eqs. 5-27
    "mwp-cwp": {"mem_l_uncoal": _C, "mem_l_coal": _C, "weight_uncoal": _F, "weight_coal": _F, "mem_l": _C,
                "departure_delay": _C, "mwp_without_bw_full": _W, "mwp_without_bw": _W, "bw_per_warp_gbs": "GB/s",
                "mwp_peak_bw": _W, "mwp": _W, "mem_cycles": _C, "comp_cycles": _C, "cwp_full": _W, "cwp": _W,
                "n": _W, "rep": "repetitions", "active_sms": "SMs", "active_blocks_per_sm": "blocks",
                "regime": "equation", "exec_cycles_app": _C, "synch_cost": _C, "exec_cycles": _C,
                "cpi": "cycles/instruction", "time_ms": "ms"},
    # Sim et al. (PPoPP 2012), Eqs. 1-23
    "gpuperf": {"insts": "instructions", "itilp": _N, "itilp_max": _N, "w_parallel": _C, "o_sync": _C,
                "o_sfu": _C, "o_cfdiv": _C, "o_bank": _C, "w_serial": _C, "t_comp": _C,
                "avg_trans_warp": "transactions", "avg_dram_lat": _C, "amat": _C, "request_bytes": "B", "mwp": _W,
                "mwp_peak_bw": _W, "cwp": _W, "mwp_cp": _W, "itmlp": _W, "t_mem": _C, "f_overlap": _F,
                "t_overlap": _C, "t_exec": _C, "t_mem_prime": _C, "t_fp": _C, "t_mem_min": _C, "b_itilp": _C,
                "b_serial": _C, "b_fp": _C, "b_memlp": _C, "time_ms": "ms"},
    # Karan Kumar G (NYU report), Eqs. 1-4; counts per thread
    "scaled-counts": {"n_threads": "threads", "comp_cycles": _C, "global_accesses": "accesses",
                      "mem_access_gm": _C, "mem_access_sm": _C, "cycles_per_thread": _C, "occupancy": _F,
                      "adjusting_weight": _N, "raw_time_ms": "ms", "time_ms": "ms"},
    # Williams et al. (CACM 2009)
    "roofline": {"flops_total": "FLOP", "dram_bytes": "B", "arithmetic_intensity": "FLOP/B", "compute_ms": "ms",
                 "memory_ms": "ms", "bound_ms": "ms", "memory_bound": _N, "waves": "waves", "wave_efficiency": _F,
                 "time_ms": "ms"},
    # Hierarchical roofline with waves (analytical/hierarchy.py): traffic per level, each level's time, waves
    "hierarchical": {"dram_traffic_bytes": "B", "l2_traffic_bytes": "B", "l2_hit_ratio": _F,
                     "smem_traffic_bytes": "B", "lsu_traffic_bytes": "B", "spill_bytes": "B", "spill_fraction": _F,
                     "issue_ms": "ms", "fp32_ms": "ms", "sfu_ms": "ms", "smem_ms": "ms", "lsu_ms": "ms", "l2_ms": "ms",
                     "dram_ms": "ms", "latency_ms": "ms", "energy_j": "J", "power_ms": "ms", "block_launch_ms": "ms",
                     "full_waves": "waves",
                     "tail_fraction": _F, "wave_efficiency": _F, "limiter": _N, "bound_ms": "ms", "time_ms": "ms"},
    # Ryoo et al. (CGO 2008), Eqs. 1-2
    "ryoo": {"efficiency": "1/instruction", "utilization": _N, "w_tb": _W, "b_sm": "blocks"},
}


def term_unit(model: str, term: str) -> str:
    """The unit of ``term`` of ``model`` ("" when the term is not listed)."""
    return TERM_UNITS.get(model, {}).get(term, "")
