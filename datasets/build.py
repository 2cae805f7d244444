"""Regenerate every shipped dataset (sweep.parquet + README.md + LICENSE) from ../shared/data/raw."""
from __future__ import annotations

import argparse
import shutil
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from hybridperf.hardware import gpu_names
from hybridperf.importers import import_sweep
from hybridperf.importers.aiwc import GPU_DEVICES
from hybridperf.sweep import _validate, noise_floor, summarize_sweep
from hybridperf.sweepfile import write_sweep

# (repository, commit, licence, licence file under RAW, whether shared/ gzip'd the files)
Origin = tuple[str, str, str, "str | None", bool]

RAW = HERE.parents[1] / "shared" / "data" / "raw"
HUB = ("github.com/AutoTuningAssociation/benchmark_hub", "8eeb99e7179e6838af95d392ac6c60cebfd8c434",
       "MIT (c) 2025 AutoTuningAssociation", "kt-benchmark-hub/LICENSE", False)
WILLEMSEN = ("github.com/fjwillemsen/kernel_tuner_paper", "5ea2c227d69d89c80ba964ec76592f8a682448b6",
             "MIT (c) 2023 Floris-Jan Willemsen", "kt-paper-willemsen/LICENSE", True)
KTT = ("github.com/HiPerCoRe/KTT", "931c41570df4ae279a2fb1d422be781728b39bed",
       "MIT (c) 2017-2025 Filip Petrovič, Jiří Filipovič, Jana Hozzová", "ktt-coulomb/License.txt", True)
NEUSIGHT = ("github.com/trsharm25/NeuSight (fork of sitar-lab/NeuSight)", "db1fdc966633fe96c0717e0706e7621ad0921ed2",
            "MIT (c) 2025 Georgia Institute of Technology and Microsoft Corporation", "neusight/LICENSE", True)
AIWC = ("github.com/BeauJoh/opencl-predictions-with-aiwc", "b53d5fe948d2aee4100d4e7e12253526e8af7cab",
        "MIT (c) 2018 Beau Johnston", "aiwc-opendwarfs/LICENSE", False)
UCI = (("UCI Machine Learning Repository #440 'SGEMM GPU kernel performance' (copy: github.com/Sarthak-Mohapatra/"
       "Classification-of-GPU-Run-as-high-or-low-time-consuming-using-various-classification-Algorithms)"),
       "7597991528265c0719d6ac31d40c9851a38ba8b4", "CC BY 4.0 (UCI); attribution below", None, False)
NS = "neusight/scripts/asplos/data/dataset/train/collect"
NS_GPUS = ("NVIDIA A100-PCIE-40GB", "Tesla P100-PCIE-16GB", "Tesla P4", "Tesla T4", "Tesla V100-PCIE-32GB")
NS_OPS = ("add", "addu", "div", "divu", "gelu", "ln", "mul", "mulu", "pow", "powu", "relu", "softmax", "tanh")
HUB_OLD = "kt-benchmark-hub/currently_unused/cachefiles/KernelTuner data"


@dataclass(frozen=True, slots=True)
class Source:
    """One raw file: where it is under RAW, how to import it, and the counts it must give."""

    path: str
    fmt: str
    origin: Origin
    options: dict[str, Any] = field(default_factory=dict)
    expect: tuple[int, int, int, int] | None = None  # rows, ok, failed, invalid
    original_path: str = ""  # path in the source repo, when it cannot be derived from `path`

    @property
    def repo_path(self) -> str:
        if self.original_path:
            return self.original_path
        inner = self.path.split("/", 1)[1]
        return inner.removesuffix(".gz") if self.origin[4] else inner


@dataclass(frozen=True, slots=True)
class DatasetSpec:
    name: str
    title: str
    licence: str
    sources: tuple[Source, ...]
    about: str
    caveats: tuple[str, ...] = ()
    extra_gpus: tuple[str, ...] = ()  # spec stems accepted although no spec file ships yet


def _kt(path: str, origin: Origin, expect: tuple[int, int, int, int], **options: Any) -> Source:
    return Source(path, "kernel-tuner", origin, {"progress": False, **options}, expect)


def _ns(op: str, gpu: str) -> Source:
    return Source(f"{NS}/{op}/p2.1.0/{gpu}.csv.gz", "neusight", NEUSIGHT, {"progress": False})


SETS: tuple[DatasetSpec, ...] = (
    DatasetSpec(
        "uci-sgemm-gtx680", "CLTune gemm_fast (CLBlast Xgemm parameters) on a GeForce GTX 680, 241,600 configs x 4 runs",
        "CC-BY-4.0", (Source("sgemm-uci/sgemm_product_dataset.zip", "uci-sgemm", UCI, {}, (241600, 241600, 0, 0)),),
        "M = N = K = 2048, fp32; 14 tuning parameters (MWG, NWG, KWG, MDIMC, NDIMC, MDIMA, NDIMB, KWI, VWM, VWN, "
        "STRM, STRN, SA, SB). Each config was run 4 times: time_ms is their median, repeats = 4, spread kept.\n\n"
        "Attribution (CC BY 4.0): Enrique G. Paredes and Rafael Ballester-Ripoll (University of Zurich), "
        "'SGEMM GPU kernel performance', UCI Machine Learning Repository, 2018. Cite Ballester-Ripoll, Paredes, "
        "Pajarola, 'Sobol Tensor Trains for Global Sensitivity Analysis' (2017) and Nugteren & Codreanu, 'CLTune' "
        "(2015). Changes: converted to the hybridperf sweep format (median/spread of the 4 runs added).",
        ("The archive's Readme says 261,400 feasible combinations; the CSV holds 241,600 rows.",)),
    DatasetSpec(
        "kt-gemm-rtx", "CLBlast Xgemm brute-forced with Kernel Tuner on RTX 2080 Ti, RTX 3060 laptop, TITAN RTX",
        "MIT", tuple(_kt(f"{HUB_OLD}/gemm/{g}.json.gz", HUB, (n, n, 0, 0), sizes={"K": 4096})
                     for g, n in (("RTX_2080_Ti", 17956), ("RTX_3060_laptop", 10000), ("RTX_Titan", 17956))),
        "4096 x 4096 x 4096 fp32 (problem_size gives M, N; K = 4096 from the hub's description); the 14 UCI "
        "parameters plus PRECISION. 32 repeats per config."),
    DatasetSpec(
        "kt-convolution", "2D convolution (4096 x 4096 image, 15 x 15 filter) on A100, A4000 and three RTX GPUs",
        "MIT", (_kt("kt-benchmark-hub/cachefiles/convolution_milo/A100.json.gz", HUB, (4362, 4201, 161, 0)),
                _kt("kt-benchmark-hub/cachefiles/convolution_milo/A4000.json.gz", HUB, (4362, 4201, 161, 0)),
                _kt(f"{HUB_OLD}/convolution/RTX_2080_Ti.json.gz", HUB, (6768, 5256, 1512, 0)),
                _kt(f"{HUB_OLD}/convolution/RTX_3060_laptop.json.gz", HUB, (6768, 5220, 1548, 0)),
                _kt(f"{HUB_OLD}/convolution/RTX_Titan.json.gz", HUB, (6768, 5256, 1512, 0))),
        "Two search spaces of the same kernel: the hub's current one on A100/A4000 (10 parameters incl. use_shmem, "
        "use_cmem; 32 repeats) and its older one on the RTX GPUs (8 parameters, 10 repeats); parameters absent "
        "from a space are empty. Failed configs (CompilationFailedConfig, RuntimeFailedConfig) are kept as "
        "status failed with the reason."),
    DatasetSpec(
        "kt-dedispersion", "Dedispersion (25,000 samples x 2,048 DMs) on A100 and RTX A4000", "MIT",
        (_kt("kt-benchmark-hub/cachefiles/dedispersion_milo/A100.json.gz", HUB, (11130, 11130, 0, 0)),
         _kt("kt-benchmark-hub/cachefiles/dedispersion_milo/A4000.json.gz", HUB, (11130, 11130, 0, 0))),
        "8 parameters (block sizes, tile sizes and strides, loop unroll); 32 repeats per config."),
    DatasetSpec(
        "kt-pnpoly", "Point-in-polygon (20M points) on RTX 2080 Ti, RTX 3060 laptop, TITAN RTX", "MIT",
        tuple(_kt(f"{HUB_OLD}/pnpoly/{g}.json.gz", HUB, e) for g, e in (
            ("RTX_2080_Ti", (4092, 3734, 358, 0)), ("RTX_3060_laptop", (4092, 3774, 318, 0)),
            ("RTX_Titan", (4092, 3750, 342, 0)))),
        "4 parameters (between_method, block_size_x, tile_size, use_method); 10 repeats per config.",
        (("SUSPECT: the RTX 2080 Ti and TITAN RTX times (0.01-0.5 ms) are ~100x below the RTX 3060 laptop's "
         "(9-144 ms); likely a different problem or a broken run. Do not mix them with the 3060 data for "
         "cross-GPU claims without checking."),)),
    DatasetSpec(
        "kt-hotspot", "Rodinia-style hotspot (8192 x 8192) on an RTX A4000 (open Kernel Tuner cache)", "MIT",
        (_kt("kt-paper-willemsen/kernels/outputdata/hotspot/hotspot_NVIDIA RTX A4000_size-8192x8192_cache.json.gz",
             WILLEMSEN, (1660, 1660, 0, 0)),),
        "12 parameters incl. temporal tiling; clocks locked (nvml_gr_clock = 1560 MHz, a config column); NVML "
        "clocks, temperature, energy and registers as counter.* columns. The cache was unfinished (open): it "
        "was closed as Kernel Tuner does (trailing comma stripped, '}}' appended)."),
    DatasetSpec(
        "kt-expdist", "expdist (32768 x 32768) on an RTX A4000 (open Kernel Tuner cache)", "MIT",
        (_kt("kt-paper-willemsen/kernels/outputdata/expdist/expdist_NVIDIA_RTX_A4000_size-32768x32768_cache.json.gz",
             WILLEMSEN, (2885, 1505, 1380, 0), sizes={"M": 32768, "N": 32768}),),
        "11 parameters; problem_size was recorded as 'callable', the sizes (M = N = 32768) come from the file "
        "name. 1,380 configs failed to compile (kept as failed). Open cache, closed as Kernel Tuner does."),
    DatasetSpec(
        "ktt-coulomb", "KTT CoulombSum3d full search space with Nsight Compute counters (RTX 2080 Ti) and GTX 1070",
        "MIT",
        (Source("ktt-coulomb/Examples/CoulombSum3d/coulomb_2080_full_search_space.json.gz", "ktt", KTT,
                {"sizes": {"grid": 256}, "progress": False}, (210, 210, 0, 0)),
         Source("ktt-coulomb/Tutorials/08ProfileBasedSearcher/TuningOutput.json.gz", "ktt", KTT,
                {"sizes": {"grid": 256}, "progress": False}, (210, 210, 0, 0))),
        "Direct Coulomb summation on a 256^3 grid (size.grid from GlobalSize x LocalSize; the atom count is not "
        "recorded). RTX 2080 Ti: 210 configs, one result each, 33 Nsight Compute counters (counter.<metric>). "
        "GTX 1070: 475 results of 210 configs (the profile-based searcher re-measured some) pooled per config "
        "(repeats = results), nvprof-style counters on the 67 profiled configs. Durations converted from us."),
    DatasetSpec(
        "neusight-gemm", "NeuSight bmm/linear (cuBLAS SGEMM) latencies over B, M, N, K on P4, P100, T4, V100, A100",
        "MIT", tuple(_ns(op, g) for op in ("bmm", "linear") for g in NS_GPUS),
        "kernel neusight-gemm, config.op = bmm or linear; sizes B, M, N, K (<= 1025 for bmm); the cuBLAS kernel "
        "chosen (info.library_kernel: its name gives the tile) and grid/block/occupancy (counter.*). Latency in "
        "ms, each a mean over NeuSight's own timing loop (no per-run spread).",
        extra_gpus=("tesla-v100-pcie-32gb",)),
    DatasetSpec(
        "neusight-ops", "NeuSight conv, elementwise, layernorm and softmax latencies on P4, P100, T4, V100, A100",
        "MIT", tuple(_ns(op, g) for op in NS_OPS for g in NS_GPUS)
        + tuple(_ns("conv", g) for g in ("NVIDIA A100 80GB PCIe", *NS_GPUS[1:])),
        "kernel neusight-<op>; elementwise/ln/softmax sizes B, H; conv sizes B, Input_Channel, Output_Channel, "
        "Kernel_Size (NeuSight's column is misspelt Kernel_Szie), Input_Size, Stride, Padding. NeuSight repeated a "
        "few shapes (1 per elementwise/softmax file, 3 per ln file): those rows are merged (median, repeats = 2).",
        extra_gpus=("tesla-v100-pcie-32gb", "a100-pcie-80gb")),
    DatasetSpec(
        "aiwc-opendwarfs", "OpenDwarfs OpenCL kernels x size class on 11 GPUs, with AIWC features", "MIT",
        (Source("aiwc-opendwarfs/derived/full_dat.csv.gz", "aiwc", AIWC, {"devices": list(GPU_DEVICES)},
                original_path="data/intermediate/full_dat.Rda (shared/ converted it to CSV with pyreadr)"),),
        "kernel aiwc-<application>-<kernel>, size.class (tiny=1, small=2, medium=3; 'large' is withheld from "
        "shared/ for independent evaluation), ~30 architecture-independent AIWC features as counter.aiwc_*. "
        "kernel_time is taken as microseconds (the source does not say; see docs/datasets.md) and converted to "
        "ms; time_ms is the median over the runs (40 per config, 90 for hmm scale_alpha_dev). Only the 11 GPUs "
        "are kept: the 14,320 rows of the 4 CPU devices (Xeon E5-2697 v2, i7-6700K, i5-3350, Xeon Phi KNL) are "
        "left out on purpose.",
        extra_gpus=("geforce-gtx-titan-x", "geforce-gtx-1080", "geforce-gtx-1080-ti", "tesla-k20c", "tesla-k40c",
                    "radeon-r9-fury-x", "radeon-r9-290x", "radeon-r9-295x2", "radeon-rx-480", "radeon-hd-7970",
                    "firepro-s9150")),
)


def _num(x: float) -> float | None:
    return None if pd.isna(x) else float(x)


def _source_rows(prov: dict[str, Any], rows: int) -> int:
    """Records in the source file: CSV rows (NeuSight, AIWC runs) or KTT results; else one per row."""
    for key, field_ in (("neusight", "source_rows"), ("aiwc", "source_rows"), ("ktt", "results")):
        if key in prov:
            return int(prov[key][field_])
    return rows


def _counts(df: pd.DataFrame) -> tuple[int, int, int, int]:
    s = summarize_sweep(df)
    return s.rows, s.ok, s.failed, s.invalid


def build(spec: DatasetSpec, raw: Path, out_root: Path) -> dict[str, Any]:
    """Import every source of one set, check its counts, write sweep.parquet, LICENSE and README.md."""
    known = set(gpu_names()) | set(spec.extra_gpus)
    frames, rows = [], []
    for src in spec.sources:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            df = import_sweep(raw / src.path, src.fmt, known_gpus=known, **src.options)
        # A shipped set keeps the count and spread of each configuration's repeats, not every repeat
        # (they would multiply its size); `hybridperf import` of a cache keeps them (info.times_ms).
        df = df.drop(columns=["info.times_ms"], errors="ignore")
        counts = _counts(df)
        if src.expect is not None and counts != src.expect:
            raise SystemExit(f"{src.path}: expected rows/ok/failed/invalid {src.expect}, got {counts}")
        prov = df.attrs["provenance"]
        noise = noise_floor(df)
        rows.append({"path": src.repo_path, "shared_path": src.path, "repo": src.origin[0],
                     "commit": src.origin[1], "licence": src.origin[2], "sha256": prov["source_sha256"],
                     "importer": src.fmt, "options": prov["importer_options"], "gpus": sorted(df["gpu"].unique()),
                     "rows": counts[0], "ok": counts[1], "failed": counts[2], "invalid": counts[3],
                     "source_rows": _source_rows(prov, counts[0]),
                     "noise_cv_median": _num(noise["cv_median"]), "noise_cv_p95": _num(noise["cv_p95"]),
                     "warnings": [str(w.message) for w in caught],
                     "source_devices": prov.get("source_devices", {}), "source_kernels": prov.get("source_kernels", {}),
                     "units": prov.get("units", {}), "notes": prov.get("notes", [])})
        frames.append(df)
    data = _validate(pd.concat(frames, ignore_index=True), spec.name, None, None)
    folder = out_root / spec.name
    folder.mkdir(exist_ok=True)
    gpus = sorted(data["gpu"].unique())
    provenance = {
        "dataset": spec.name, "title": spec.title, "licence": spec.licence, "kernels": sorted(data["kernel"].unique()),
        "gpus": gpus, "gpus_without_spec": sorted(set(gpus) - set(gpu_names())),
        "sources": rows, "command": f"python datasets/build.py --only {spec.name}",
        "source_devices": {k: v for r in rows for k, v in r["source_devices"].items()},
        "source_kernels": {k: v for r in rows for k, v in r["source_kernels"].items()},
    }
    write_sweep(data, folder / "sweep.parquet", provenance=provenance)
    licences = {src.origin[3] for src in spec.sources if src.origin[3]}
    for lic in licences:
        shutil.copyfile(raw / lic, folder / "LICENSE")
    (folder / "README.md").write_text(_readme(spec, data, provenance, (folder / "sweep.parquet").stat().st_size))
    return {"name": spec.name, "rows": len(data), "bytes": (folder / "sweep.parquet").stat().st_size}


def _pct(x: float | None) -> str:
    return "-" if x is None or pd.isna(x) else f"{100 * x:.2f}%"


def _readme(spec: DatasetSpec, data: pd.DataFrame, prov: dict[str, Any], size: int) -> str:
    s, noise = summarize_sweep(data), noise_floor(data)
    first = spec.sources[0].origin
    lines = [f"# {spec.name}: {spec.title}", "", spec.about, "",
             (f"- **Source**: {first[0]} at commit `{first[1]}`; files below (as copied into "
             f"`../shared/data/raw/{spec.sources[0].path.split('/')[0]}`, see its SOURCE.md)."),
             f"- **Licence**: {first[2]}" + ("; the licence text is in `LICENSE`." if first[3] else "."),
             f"- **GPUs** (spec stems): {', '.join(s.gpus)}"
             + (f"; without a shipped spec yet: {', '.join(prov['gpus_without_spec'])}" if prov["gpus_without_spec"] else ""),
             f"- **Kernels**: {', '.join(s.kernels) if len(s.kernels) <= 6 else f'{len(s.kernels)} (' + ', '.join(s.kernels[:4]) + ', ...)'}",
             "- **Units**: `time_ms`, `time_std_ms`, `time_min_ms`, `time_max_ms` in milliseconds. "
             + " ".join(sorted({f"`{k}`: {u}." for r in prov["sources"] for k, u in r["units"].items()})),
             (f"- **Rows**: {s.rows:,} ({s.ok:,} ok, {s.failed:,} failed, {s.invalid:,} invalid); "
             f"noise floor (per-config CV of repeats, median / p95): {_pct(noise['cv_median'])} / {_pct(noise['cv_p95'])}"
             f" over {noise['configs']:,} configs."),
             (f"- **Columns**: sizes {', '.join(s.sizes) or '-'}; {len(s.configs)} config parameters "
             f"({', '.join(s.configs) if len(s.configs) <= 16 else ', '.join(list(s.configs)[:16]) + ', ...'}); "
             f"{len(s.counters)} counters."),
             (f"- **File**: `sweep.parquet` (sweep format, zstd), {size:,} bytes. Load with "
             f"`hybridperf.datasets.load_dataset({spec.name!r})`."),
             f"- **Built by**: `python datasets/build.py --only {spec.name}` (reads `../shared/data/raw`).", ""]
    if spec.caveats:
        lines += ["## Caveats", "", *[f"- {c}" for c in spec.caveats], ""]
    lines += ["## Sources and row counts", "",
              "| file (path in the source repo) | GPU | source rows | rows | ok | failed | invalid | noise CV median / p95 |",
              "|---|---|---|---|---|---|---|---|"]
    for r in prov["sources"]:
        lines.append(f"| `{r['path']}` | {', '.join(r['gpus'])} | {r['source_rows']:,} | {r['rows']:,} | {r['ok']:,} | "
                     f"{r['failed']:,} | {r['invalid']:,} | {_pct(r['noise_cv_median'])} / {_pct(r['noise_cv_p95'])} |")
    commits = sorted({(r["repo"], r["commit"]) for r in prov["sources"]})
    lines += ["", "Repository and commit: " + "; ".join(f"{repo} @ `{c}`" for repo, c in commits) + ".",
              ("Per-file sha256, importer options and warnings are stored in the Parquet metadata "
              "(`hybridperf.sweepfile.read_provenance`)."), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--raw", type=Path, default=RAW, help="the shared raw data folder (default: %(default)s)")
    ap.add_argument("--only", nargs="*", default=None, help="dataset names to rebuild (default: all)")
    args = ap.parse_args(argv)
    if not args.raw.is_dir():
        print(f"build.py: error: raw data folder {args.raw} not found; pass --raw", file=sys.stderr)
        return 2
    names = {s.name for s in SETS}
    unknown = sorted(set(args.only or ()) - names)
    if unknown:
        print(f"build.py: error: unknown dataset {unknown[0]!r}; choose from {', '.join(sorted(names))}", file=sys.stderr)
        return 2
    for spec in SETS:
        if args.only is None or spec.name in args.only:
            res = build(spec, args.raw, HERE)
            print(f"{res['name']}: {res['rows']:,} rows, {res['bytes']:,} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
