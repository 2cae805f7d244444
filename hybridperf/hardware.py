"""GPU specs and per-compute-capability limits, loaded from versioned TOML data files."""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from hybridperf.cc_limits import CC_INT_KEYS, MAX_LIMIT_VALUE, MAX_SPEC_VALUE, CCLimits, in_range, load_cc_limits
from hybridperf.errors import HybridperfError, SpecError, UnknownGPUError
from hybridperf.tomlfile import load_folder, load_search_path, read_document, search_path
from hybridperf.userconfig import config_gpu_path

__all__ = [
    "GPU_PATH_ENV",
    "MODEL_KEYS",
    "OPTIONAL_MODEL_KEYS",
    "OPTIONAL_SPEC_KEYS",
    "SPEC_KEYS",
    "CCLimits",
    "GPUSpec",
    "describe_gpu",
    "device_table",
    "gpu_names",
    "gpu_search_path",
    "list_gpus",
    "load_cc_limits",
    "load_gpu",
    "normalize_name",
]

FORMAT_VERSION = 1
# Folders or spec files searched for GPU names before the shipped specs, separated like PATH.
GPU_PATH_ENV = "HYBRIDPERF_GPU_PATH"
_SHIPPED_DIR = Path(str(resources.files("hybridperf") / "gpus"))
SPEC_KEYS = (
    "sm_count", "core_clock_mhz", "dram_bandwidth_gbs", "memory_gib", "l2_cache_kib",
    "fp32_lanes_per_sm", "sfu_per_sm", "peak_fp32_gflops",
)
# Datasheet values a spec may leave out (None then): the board power, which bounds the clock a part sustains, and
# the process node, from which the energy per instruction of the power cap defaults.
OPTIONAL_SPEC_KEYS = ("tdp_w", "process_nm")
# Datasheet values no GPU lies outside of, by far (the shipped specs: clocks 706-2040 MHz, 57.6-4800 GB/s,
# 336-66,900 GFLOP/s): a value outside was given in another unit (1.455 for a 1455 MHz clock made every time
# 1000x slow) -> (low, high, the unit and an example).
_PLAUSIBLE = {"core_clock_mhz": (50.0, 10_000.0, "MHz, e.g. 1455"), "dram_bandwidth_gbs": (1.0, 1e5, "GB/s, e.g. 900"),
              "peak_fp32_gflops": (10.0, 1e7, "GFLOP/s, e.g. 14000"), "memory_gib": (0.0625, 1e5, "GiB, e.g. 32"),
              "sm_count": (1.0, 10_000.0, "SMs, e.g. 80"),
              "smem_bank_ways_per_cycle": (1.0, 32.0, "addresses one bank serves per cycle, e.g. 1 or 2")}
# The per-SM limit that may be 0: shared memory the driver reserves per block.
_MAY_BE_ZERO = ("reserved_smem_per_block_bytes",)
MODEL_KEYS = (
    "dram_latency_cycles", "departure_delay_coal_cycles", "departure_delay_uncoal_cycles",
    "fp_latency_cycles", "avg_inst_latency_cycles", "issue_cycles", "l1_hit_latency_cycles",
    "l2_hit_latency_cycles", "smem_latency_cycles", "sync_gamma", "transaction_bytes",
)
# Machine parameters of the hierarchical roofline (analytical/hierarchy.py) that older spec files do not
# give: each defaults (and says so in ``sources``) where a file leaves it out; see docs/gpu-spec-format.md.
OPTIONAL_MODEL_KEYS = (
    "l2_bandwidth_gbs", "smem_bytes_per_cycle_per_sm", "l1_bytes_per_cycle_per_sm", "issue_per_cycle_per_sm",
    "launch_overhead_us", "energy_per_inst_pj", "power_burst_ms", "block_launch_cycles", "smem_bank_ways_per_cycle",
)
# Measured L2-to-DRAM bandwidth ratios (gpu-benches gpu-l2-cache and gpu-cache over datasheet DRAM bandwidth:
# A100 80GB 5482/1935 = 2.8, H100 PCIe 7758/2000 = 3.9, H200 13527/4800 = 2.8, L40 5332/864 = 6.2, V100 2440/900
# = 2.7): 3 is about their median, the default for specs without a measured L2 bandwidth.
L2_TO_DRAM_BANDWIDTH = 3.0
DEFAULT_LAUNCH_OVERHEAD_US = 3.0
# The power cap's constants (analytical/hierarchy.py), fitted on the sustained thread-instruction rate of the 75 W,
# 16 nm Tesla P4 in NeuSight's cuBLAS GEMM runs by experiments/power_constants.py (results/power_constants.md):
# board energy per thread instruction per nanometre of the process node (energy per operation scales about with
# the feature size at a constant supply voltage), and how long a part runs above its cap before the clock drops.
ENERGY_PJ_PER_INST_PER_NM = 2.24
POWER_BURST_MS = 0.27


@dataclass(frozen=True, slots=True)
class GPUSpec:
    """One GPU: datasheet values, model machine parameters and per-SM limits.

    Units are in the field names; ``sources`` maps every numeric field to where it came from.
    """

    name: str
    compute_capability: str
    sm_count: int
    core_clock_mhz: float
    dram_bandwidth_gbs: float
    memory_gib: float
    l2_cache_kib: float
    fp32_lanes_per_sm: int
    sfu_per_sm: int
    peak_fp32_gflops: float
    dram_latency_cycles: float
    departure_delay_coal_cycles: float
    departure_delay_uncoal_cycles: float
    fp_latency_cycles: float
    avg_inst_latency_cycles: float
    issue_cycles: float
    l1_hit_latency_cycles: float
    l2_hit_latency_cycles: float
    smem_latency_cycles: float
    sync_gamma: float
    transaction_bytes: float
    limits: CCLimits
    aliases: tuple[str, ...] = ()
    sources: dict[str, str] = field(default_factory=dict, compare=False, hash=False)
    path: str = ""
    sha256: str = ""
    l2_bandwidth_gbs: float | None = None
    smem_bytes_per_cycle_per_sm: float | None = None
    l1_bytes_per_cycle_per_sm: float | None = None
    issue_per_cycle_per_sm: float | None = None
    launch_overhead_us: float | None = None
    tdp_w: float | None = None
    process_nm: float | None = None
    energy_per_inst_pj: float | None = None
    power_burst_ms: float | None = None
    block_launch_cycles: float | None = None
    smem_bank_ways_per_cycle: float | None = None

    def __post_init__(self) -> None:
        # Sizes and granularities the occupancy calculator divides by or fits blocks into (0 divided by zero, or
        # made every launch "ok" with no time); the shared memory reserved per block may be 0.
        zero = [k for k in CC_INT_KEYS if k not in _MAY_BE_ZERO and getattr(self.limits, k) < 1]
        if zero:
            raise SpecError(f"{self.path or self.name}: limits.{zero[0]} must be at least 1, got "
                            f"{getattr(self.limits, zero[0])}")
        for key, (value, why) in _optional_defaults(self).items():
            if getattr(self, key) is None and value is not None:  # frozen: fill once, and say where it came from
                object.__setattr__(self, key, value)
                self.sources.setdefault(f"model.{key}", f"default: {why}")
        for key in SPEC_KEYS + MODEL_KEYS + OPTIONAL_MODEL_KEYS + OPTIONAL_SPEC_KEYS:
            v = getattr(self, key)
            if v is None and (key in OPTIONAL_SPEC_KEYS or key in ("energy_per_inst_pj", "block_launch_cycles")):
                continue  # unknown: no power cap without an energy per instruction, no block-launch floor
            if not in_range(v, MAX_SPEC_VALUE) or not v > 0:
                raise SpecError(f"{self.path or self.name}: {key} must be a positive finite number up to "
                                f"{MAX_SPEC_VALUE:g}, got {str(v)[:30]}")
            low, high, unit = _PLAUSIBLE.get(key, (0.0, MAX_SPEC_VALUE, ""))
            if not low <= v <= high:
                raise SpecError(f"{self.path or self.name}: spec.{key} = {v:g} lies outside {low:g} .. {high:g}, "
                                f"which every GPU lies within; give it in {unit}")

    @property
    def warp_size(self) -> int:
        return self.limits.warp_size

    @property
    def core_clock_hz(self) -> float:
        return self.core_clock_mhz * 1e6

    @property
    def dram_bytes_per_cycle(self) -> float:
        """DRAM bandwidth expressed in bytes per core cycle (the unit the cycle models use)."""
        return self.dram_bandwidth_gbs * 1e9 / self.core_clock_hz

    @property
    def key(self) -> str:
        """The name sweep rows carry for this GPU: the spec file's stem where that name finds this same
        spec (shipped, or on the GPU search path), else the file's path, else its name (built in memory)."""
        if not self.path:
            return self.name
        path = Path(self.path)
        if path.resolve().parent == _SHIPPED_DIR.resolve():
            return path.stem
        try:
            found = load_gpu(path.stem)
        except HybridperfError:
            return str(self.path)
        return path.stem if found.sha256 == self.sha256 else str(self.path)

    def replace(self, **changes: Any) -> GPUSpec:
        """Return a copy with some machine parameters changed (e.g. after calibration)."""
        return dataclasses.replace(self, **changes)


# Compute capability 7.0 on (Volta, Turing, Ampere, Ada, Hopper): an SM of four processing blocks, each with one warp
# scheduler and one dispatch unit issuing one warp instruction per clock (NVIDIA Tesla V100 GPU Architecture
# whitepaper, "Volta SM Architecture"; the Turing, A100 and H100 whitepapers keep the four partitions).
DISPATCH_PER_CYCLE_CC7 = 4.0


def _default_issue_rate(gpu: GPUSpec) -> tuple[float, str]:
    """The warp instructions an SM issues per cycle when the spec does not say, and why."""
    if int(gpu.compute_capability.split(".")[0]) >= 7:
        return (DISPATCH_PER_CYCLE_CC7,
                "4 processing blocks x 1 warp instruction per cycle: from Volta on (compute capability >= 7.0) each SM "
                "partition's scheduler dispatches one warp instruction per clock (NVIDIA V100, Turing, A100, H100 "
                "architecture whitepapers), so a 64-lane part issues FP32 at 2 per cycle (its fp32 level) and other "
                "instructions beside them; the INT32 pipe's own limit is not modelled")
    return (gpu.fp32_lanes_per_sm / gpu.limits.warp_size,
            "FP32 lanes / warp size: every warp instruction at the FP32 pipe's rate, the issue assumption of MWP-CWP's "
            "issue_cycles (seed 002's 4 cycles = 32 lanes / 8 SPs); before Volta a scheduler's second dispatch unit "
            "needs an independent instruction of the same warp, which the counts do not say")


def _optional_defaults(gpu: GPUSpec) -> dict[str, tuple[float | None, str]]:
    """The value each optional machine parameter takes when a spec leaves it out, and why."""
    kepler = gpu.compute_capability.startswith("3.")
    bank_bytes = 8 if kepler else 4
    return {
        "l2_bandwidth_gbs": (L2_TO_DRAM_BANDWIDTH * gpu.dram_bandwidth_gbs,
                             f"{L2_TO_DRAM_BANDWIDTH:g} x dram_bandwidth_gbs, about the median measured L2/DRAM "
                             "bandwidth ratio (gpu-benches gpu-l2-cache/gpu-cache over datasheet DRAM bandwidth: A100 "
                             "2.8, H100 PCIe 3.9, H200 2.8, L40 6.2, V100 2.7)"),
        "smem_bytes_per_cycle_per_sm": (32.0 * bank_bytes,
                                        f"32 banks x {bank_bytes} B per cycle (CUDA C++ Programming Guide, shared "
                                        f"memory of compute capability {'3.x: 64-bit' if kepler else '>= 5.x: 32-bit'}"
                                        " banks)"),
        "l1_bytes_per_cycle_per_sm": (32.0 * bank_bytes,
                                      "equal to the shared-memory bandwidth: L1 and shared memory are one SRAM "
                                      "array (Kepler, Volta and later; NVIDIA architecture whitepapers)"),
        "issue_per_cycle_per_sm": _default_issue_rate(gpu),
        "smem_bank_ways_per_cycle": (1.0, "one address per bank per cycle: an n-way bank conflict takes n wavefronts "
                                          "(CUDA C++ Programming Guide, shared memory)"),
        "launch_overhead_us": (DEFAULT_LAUNCH_OVERHEAD_US,
                               "a few microseconds from launch to completion of an empty kernel on recent NVIDIA "
                               "GPUs (gpu-benches gpu-small-kernels); timings taken through a framework add more, "
                               "which calibration absorbs"),
        "energy_per_inst_pj": (None if gpu.process_nm is None else ENERGY_PJ_PER_INST_PER_NM * gpu.process_nm,
                               f"{ENERGY_PJ_PER_INST_PER_NM:g} pJ per thread instruction per nm of process_nm, the "
                               "board energy per instruction of the 16 nm Tesla P4 at its sustained rate, scaled by "
                               "the node (experiments/power_constants.py); no power cap without process_nm"),
        "block_launch_cycles": (None, "not measured for this part: no block-launch floor (calibrate it, "
                                      "`hybridperf calibrate --model hierarchical --param block_launch_cycles`)"),
        "power_burst_ms": (POWER_BURST_MS,
                           "how long a part runs above its power cap before the clock drops, fitted with the energy "
                           "per instruction on the Tesla P4's fastest runs of 1-100 ms "
                           "(experiments/power_constants.py)"),
    }


def _values(path: Path, doc: dict[str, Any], section: str, keys: tuple[str, ...],
            required: tuple[str, ...] = ()) -> tuple[dict[str, Any], dict[str, str]]:
    table = doc.get(section, {})
    if not isinstance(table, dict):
        raise SpecError(f"{path}: [{section}] must be a table")
    unknown = set(table) - set(keys)
    if unknown:
        raise SpecError(
            f"{path}: unknown key {section}.{sorted(unknown)[0]}; allowed keys: {', '.join(keys)}"
        )
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for key in keys:
        if key not in table:
            if key in required:
                raise SpecError(f"{path}: missing {section}.{key}; add {key} = {{ value = ..., source = \"...\" }}")
            continue
        entry = table[key]
        if not isinstance(entry, dict) or set(entry) != {"value", "source"}:
            raise SpecError(
                f"{path}: {section}.{key} must be {{ value = ..., source = \"...\" }}, got {entry!r}"
            )
        value, source = entry["value"], entry["source"]
        hi = MAX_LIMIT_VALUE if section == "limits" else MAX_SPEC_VALUE
        if not in_range(value, hi):
            got = (f"the text {value[:30]!r} (write the number without quotes)" if isinstance(value, str)
                   else str(value)[:30])
            raise SpecError(f"{path}: {section}.{key} value must be a finite number from 0 to {hi:g}, got {got}")
        if not isinstance(source, str) or not source.strip():
            raise SpecError(f"{path}: {section}.{key} needs a non-empty source (datasheet, table, 'calibrated'...)")
        values[key] = value
        sources[f"{section}.{key}"] = source
    return values, sources


def _parse_gpu(path: Path) -> GPUSpec:
    raw, doc = read_document(path, SpecError, "GPU spec", FORMAT_VERSION,
                             {"format_version", "name", "aliases", "compute_capability", "spec", "model", "limits",
                              "notes"})
    name = doc.get("name")
    if not isinstance(name, str) or not name.strip():
        raise SpecError(f"{path}: missing name; add name = \"...\"")
    cc = doc.get("compute_capability")
    if not isinstance(cc, str):
        raise SpecError(f"{path}: compute_capability must be a string such as \"8.6\", got {cc!r}")
    aliases = doc.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
        raise SpecError(f"{path}: aliases must be a list of strings")
    spec, s1 = _values(path, doc, "spec", SPEC_KEYS + OPTIONAL_SPEC_KEYS, required=SPEC_KEYS)
    model, s2 = _values(path, doc, "model", MODEL_KEYS + OPTIONAL_MODEL_KEYS, required=MODEL_KEYS)
    try:
        base = load_cc_limits(cc)
    except SpecError as exc:
        raise SpecError(f"{path}: compute_capability: {exc}") from None
    overrides, s3 = _values(path, doc, "limits", CC_INT_KEYS)
    for key, value in overrides.items():
        if not float(value).is_integer():
            raise SpecError(f"{path}: limits.{key} must be a whole number, got {value!r}")
    limits = dataclasses.replace(base, **{k: int(v) for k, v in overrides.items()}) if overrides else base
    for key in ("sm_count", "fp32_lanes_per_sm", "sfu_per_sm"):
        if not float(spec[key]).is_integer():
            raise SpecError(f"{path}: spec.{key} must be a whole number, got {spec[key]!r}")
        spec[key] = int(spec[key])
    return GPUSpec(
        name=name, compute_capability=cc, limits=limits,
        aliases=tuple(a.lower() for a in aliases),
        sources={**s1, **s2, **s3}, path=str(path),
        sha256=hashlib.sha256(raw).hexdigest(), **spec, **model,
    )


@functools.cache
def _parse_shipped(path: Path) -> GPUSpec:
    """A shipped spec file, parsed once per process (one object per spec, whichever lookup reads it first)."""
    return _parse_gpu(path)


@functools.cache
def _shipped() -> tuple[GPUSpec, ...]:
    return load_folder(_SHIPPED_DIR, _parse_shipped, _names, SpecError)


@functools.cache
def _shipped_stems() -> dict[str, Path]:
    """Each shipped spec file by its normalised stem (file names only: nothing parsed)."""
    return {normalize_name(p.stem): p for p in sorted(_SHIPPED_DIR.glob("*.toml"))}


def _shipped_by_stem(key: str) -> GPUSpec | None:
    """The shipped spec whose file stem normalises to ``key``, parsed alone: a name given as a file stem (what
    model files and data sets store) needs none of the other 30 files (0.02 s of a cold ``predict``). That no
    two shipped files claim one name is :func:`_shipped`'s check, which every other lookup and the tests run."""
    path = _shipped_stems().get(key)
    return None if path is None else _parse_shipped(path)


def _names(spec: GPUSpec) -> set[str]:
    """Every normalised name a spec answers to: its name (with and without the vendor), file stem and aliases."""
    bare = re.sub(r"^(nvidia|amd)\s+", "", spec.name, flags=re.IGNORECASE)
    return {normalize_name(spec.name), normalize_name(bare), normalize_name(Path(spec.path).stem),
            *(normalize_name(a) for a in spec.aliases)}


def normalize_name(name: str) -> str:
    """How GPU names are compared: lower-case letters and digits only ('RTX 2080-Ti' -> 'rtx2080ti')."""
    return "".join(ch for ch in name.lower() if ch.isalnum())


@functools.cache
def device_table() -> dict[str, dict[str, str]]:
    """The device-name table (data/device_names.toml) by normalised name: ``gpu`` (a spec stem) or ``refuse``
    (the reason and fix) and ``stem``, ``printed_by``, ``source`` (where the name was seen printed)."""
    path = Path(str(resources.files("hybridperf") / "data" / "device_names.toml"))
    _, doc = read_document(path, SpecError, "device-name table", FORMAT_VERSION, {"format_version", "device"})
    out: dict[str, dict[str, str]] = {}
    for i, entry in enumerate(doc.get("device", [])):
        name, gpu, refuse = entry.get("name"), entry.get("gpu"), entry.get("refuse")
        if not isinstance(name, str) or (gpu is None) == (refuse is None) or not entry.get("source"):
            raise SpecError(f"{path}: device {i} needs a name, a source and one of gpu or refuse")
        out[normalize_name(name)] = {k: v for k, v in entry.items() if isinstance(v, str)}
    return out


def gpu_search_path() -> list[Path]:
    """Where GPU names are looked up before the shipped specs: ``$HYBRIDPERF_GPU_PATH`` (separated by
    ``os.pathsep``), then the configuration file's ``gpu_path``; each entry a folder of spec files or one."""
    return search_path(GPU_PATH_ENV, config_gpu_path())


def _user_specs() -> list[GPUSpec]:
    return load_search_path(gpu_search_path(), _parse_gpu, _names, SpecError, lambda entry: UnknownGPUError(
        f"GPU search path entry {str(entry)!r} (from ${GPU_PATH_ENV} or the configuration file's gpu_path) does "
        "not exist; fix or remove it"))


def list_gpus() -> list[GPUSpec]:
    """Every shipped GPU spec, sorted by file name."""
    return list(_shipped())


def gpu_names() -> list[str]:
    """Short names (file stems) of the GPU specs on the search path and the shipped ones."""
    return [*(Path(s.path).stem for s in _user_specs()), *(s.key for s in _shipped())]


def _by_name(key: str) -> GPUSpec | None:
    """The spec a normalised name means: a spec on the search path first, then a shipped file stem, then any shipped
    name or alias; None if none."""
    for s in _user_specs():
        if key in _names(s):
            return s
    by_stem = _shipped_by_stem(key)
    if by_stem is not None:
        return by_stem
    return next((s for s in _shipped() if key in _names(s)), None)


def load_gpu(name_or_path: str | Path) -> GPUSpec:
    """Load a GPU spec by shipped name/alias (case and punctuation ignored) or by TOML path.

    Raises
    ------
    UnknownGPUError
        If the name matches no shipped spec and is not an existing file.
    SpecError
        If the file is malformed (the message names file, key and fix).
    """
    if isinstance(name_or_path, GPUSpec):
        return name_or_path
    text = str(name_or_path)
    p = Path(text)
    if p.suffix == ".toml" or p.is_file():
        if not p.is_file():
            raise UnknownGPUError(f"GPU spec file {text!r} does not exist; check the path")
        return _parse_gpu(p)
    key = normalize_name(text)
    found = _by_name(key)
    if found is not None:
        return found
    entry = device_table().get(key)  # a device name as a tool prints it (nvidia-smi, CUDA, OpenCL, data sets)
    if entry is not None and "gpu" in entry:
        return load_gpu(entry["gpu"])
    if entry is not None:
        raise UnknownGPUError(f"device {text!r}: {entry['refuse']}")
    from hybridperf.names import closest_name

    near = closest_name(key, {n for s in (*_user_specs(), *_shipped()) for n in _names(s)})  # normalised, as key
    found = _by_name(near) if near else None
    # Not "did you mean": the closest name may be another part (rtx-a5000 -> rtx-a6000), not a typo.
    hint = f" (the closest name with a spec: {found.key!r})" if found is not None else ""
    raise UnknownGPUError(
        f"unknown GPU {text!r}{hint}; run 'hybridperf gpus' for the shipped names, pass a spec file path, or put "
        f"your spec's folder on ${GPU_PATH_ENV}"
    )


def describe_gpu(spec: GPUSpec) -> list[dict[str, Any]]:
    """Every value of a spec with its unit-bearing name, section and source, in file order.

    Sections: ``spec`` (datasheet), ``model`` (the analytical models' machine parameters) and ``limits``
    (per-SM limits: the compute-capability table's, or the spec's own ``[limits]`` overrides). Sources cite
    papers by author and venue (:func:`hybridperf.references.cite`).
    """
    from hybridperf.references import cite

    rows: list[dict[str, Any]] = []
    for section, keys, optional in (("spec", SPEC_KEYS, OPTIONAL_SPEC_KEYS),
                                    ("model", MODEL_KEYS, OPTIONAL_MODEL_KEYS)):
        given = [k for k in optional if f"{section}.{k}" in spec.sources]  # optional values the file gives
        rows += [{"section": section, "name": k, "value": getattr(spec, k),
                  "source": cite(spec.sources.get(f"{section}.{k}", ""))} for k in (*keys, *given)]
    cc_source = f"compute capability {spec.compute_capability} table: {spec.limits.source}"
    for f in dataclasses.fields(CCLimits):
        if f.name in ("source", "compute_capability"):
            continue
        rows.append({"section": "limits", "name": f.name, "value": getattr(spec.limits, f.name),
                     "source": cite(spec.sources.get(f"limits.{f.name}", cc_source))})
    return rows
