"""The hostile suite's input files: one valid file of each kind and many hostile variants, made in a folder."""
from __future__ import annotations

import functools
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hybridperf.hardware import load_gpu
from hybridperf.kernel import load_kernel
from tests.paths import SWEEP_FIXTURES, TITANV_SWEEP

BOMB_BYTES = 256 << 20  # decompresses to 4x the 64 MiB input limit
SPARSE_BYTES = 1 << 30


@functools.cache
def _zeros_gzip(n_bytes: int, line: bytes = b"0\n") -> bytes:
    """gzip of ``n_bytes`` of repeated ``line``, compressed block by block (never held in memory)."""
    c = zlib.compressobj(1, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = line * ((1 << 20) // len(line))
    out = [c.compress(block) for _ in range(n_bytes // len(block))]
    return b"".join(out) + c.flush()


@functools.cache
def _zip_bomb(n_bytes: int, name: str = "sgemm_product.csv") -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf, zf.open(name, "w", force_zip64=True) as fh:
        fh.write(b"MWG,NWG,KWG,MDIMC,NDIMC,MDIMA,NDIMB,KWI,VWM,VWN,STRM,STRN,SA,SB,"
                 b"Run1 (ms),Run2 (ms),Run3 (ms),Run4 (ms)\n")
        block = b"16,16,16,8,8,8,8,2,1,1,0,0,0,0,1,1,1,1\n" * 25_000
        for _ in range(n_bytes // len(block)):
            fh.write(block)
    return buf.getvalue()


def rehash(doc: dict[str, Any]) -> str:
    """A model document whose sha256 is recomputed after an edit (the checksum is not a signature)."""
    payload = json.dumps(doc["body"], sort_keys=True, allow_nan=False).encode()
    return json.dumps({**doc, "sha256": hashlib.sha256(payload).hexdigest()})


def _sub(text: str, pattern: str, repl: str) -> str:
    out, n = re.subn(pattern, repl, text, count=1, flags=re.MULTILINE)
    assert n == 1, pattern
    return out


GPU_VARIANTS: dict[str, Callable[[str], str]] = {
    "inf": lambda t: _sub(t, r"(sm_count\s*=\s*\{\s*value\s*=\s*)\d+", r"\g<1>inf"),
    "nan": lambda t: _sub(t, r"(dram_bandwidth_gbs\s*=\s*\{\s*value\s*=\s*)[\d.]+", r"\g<1>nan"),
    "neg": lambda t: _sub(t, r"(core_clock_mhz\s*=\s*\{\s*value\s*=\s*)[\d.]+", r"\g<1>-1455"),
    "zero": lambda t: _sub(t, r"(dram_bandwidth_gbs\s*=\s*\{\s*value\s*=\s*)[\d.]+", r"\g<1>0"),
    "bigint": lambda t: _sub(t, r"(sm_count\s*=\s*\{\s*value\s*=\s*)\d+", r"\g<1>" + "9" * 400),
    "huge": lambda t: _sub(t, r"(dram_bandwidth_gbs\s*=\s*\{\s*value\s*=\s*)[\d.]+", r"\g<1>1e300"),
    "e999": lambda t: _sub(t, r"(dram_bandwidth_gbs\s*=\s*\{\s*value\s*=\s*)[\d.]+", r"\g<1>1e999"),
    "string": lambda t: _sub(t, r"(sm_count\s*=\s*\{\s*value\s*=\s*)\d+", r'\g<1>"80"'),
    "bool": lambda t: _sub(t, r"(sm_count\s*=\s*\{\s*value\s*=\s*)\d+", r"\g<1>true"),
    "frac_sms": lambda t: _sub(t, r"(sm_count\s*=\s*\{\s*value\s*=\s*)\d+", r"\g<1>80.5"),
    "nosource": lambda t: _sub(t, r'(sm_count\s*=\s*\{\s*value\s*=\s*\d+\s*),\s*source\s*=\s*"[^"]*"', r"\1"),
    "missing": lambda t: _sub(t, r"^\s*sm_count\s*=.*\n", ""),
    "unknown_key": lambda t: t + '\n[spec2]\nx = 1\n',
    "version": lambda t: _sub(t, r"^format_version\s*=\s*1", "format_version = 2"),
    "noname": lambda t: _sub(t, r"^name\s*=.*\n", ""),
    "cc_unknown": lambda t: _sub(t, r'^compute_capability\s*=\s*"[^"]*"', 'compute_capability = "9.9"'),
    "cc_number": lambda t: _sub(t, r'^compute_capability\s*=\s*"[^"]*"', "compute_capability = 7.0"),
    "aliases": lambda t: re.sub(r"^aliases\s*=.*$", 'aliases = "titan"', t, count=1, flags=re.MULTILINE)
    if re.search(r"^aliases", t, re.MULTILINE) else 'aliases = "titan"\n' + t,
    "limit_frac": lambda t: t + '\n[limits]\nmax_warps_per_sm = { value = 64.5, source = "x" }\n',
    "limit_neg": lambda t: t + '\n[limits]\nmax_warps_per_sm = { value = -1, source = "x" }\n',
    "limit_huge": lambda t: t + '\n[limits]\nregisters_per_sm = { value = 99999999999999, source = "x" }\n',
    "syntax": lambda t: t + "\n[spec\n",
    "dupkey": lambda t: t + "\nname = \"again\"\n",
    "deep": lambda t: t + "\nnotes = " + "[" * 3000 + "]" * 3000 + "\n",
    "deep_tables": lambda t: t + "\n[notes]\n" + "".join(f"[notes{'.a' * i}]\nx = 1\n" for i in range(1, 40)),
    "big": lambda t: t + "\n#" + "x" * (2 << 20) + "\n",
}


KERNEL_VARIANTS: dict[str, Callable[[str], str]] = {
    "neg_count": lambda t: _sub(t, r'^comp_insts\s*=.*$', 'comp_insts = "1000 - N"'),
    "neg_threads": lambda t: _sub(t, r'^threads_per_block\s*=.*$', 'threads_per_block = "-BLOCK"'),
    "neg_bytes": lambda t: _sub(t, r'^dram_bytes\s*=.*$', 'dram_bytes = "-4 * N"'),
    "div_zero": lambda t: _sub(t, r'^comp_insts\s*=.*$', 'comp_insts = "N / 0"'),
    "overflow": lambda t: _sub(t, r'^comp_insts\s*=.*$', 'comp_insts = "10 ** 400"'),
    "pow_overflow": lambda t: _sub(t, r'^comp_insts\s*=.*$', 'comp_insts = "N ** N ** N"'),
    "const_inf": lambda t: _sub(t, r'^comp_insts\s*=.*$', 'comp_insts = "1e999 * N"'),
    "const_bigint": lambda t: _sub(t, r'^comp_insts\s*=.*$', 'comp_insts = "' + "9" * 400 + '"'),
    "deep_formula": lambda t: _sub(t, r'^comp_insts\s*=.*$', 'comp_insts = "' + "-" * 1500 + 'N"'),
    "long_sum": lambda t: _sub(t, r'^comp_insts\s*=.*$', 'comp_insts = "' + "N+" * 900 + 'N"'),
    "long_text": lambda t: _sub(t, r'^comp_insts\s*=.*$', 'comp_insts = "' + "N" * 3000 + '"'),
    "parens": lambda t: _sub(t, r'^comp_insts\s*=.*$', 'comp_insts = "' + "(" * 300 + "N" + ")" * 300 + '"'),
    "import": lambda t: _sub(t, r'^comp_insts\s*=.*$', "comp_insts = \"__import__('os').system('true')\""),
    "lambda": lambda t: _sub(t, r'^comp_insts\s*=.*$', 'comp_insts = "(lambda: 1)()"'),
    "attribute": lambda t: _sub(t, r'^comp_insts\s*=.*$', 'comp_insts = "N.real"'),
    "subscript": lambda t: _sub(t, r'^comp_insts\s*=.*$', 'comp_insts = "N[0]"'),
    "string_const": lambda t: _sub(t, r'^comp_insts\s*=.*$', "comp_insts = \"'abc'\""),
    "unknown_name": lambda t: _sub(t, r'^comp_insts\s*=.*$', 'comp_insts = "2 * Q"'),
    "unknown_func": lambda t: _sub(t, r'^comp_insts\s*=.*$', 'comp_insts = "exp(N)"'),
    "empty_formula": lambda t: _sub(t, r'^comp_insts\s*=.*$', 'comp_insts = ""'),
    "syntax_formula": lambda t: _sub(t, r'^comp_insts\s*=.*$', 'comp_insts = "2 * * N"'),
    "list_formula": lambda t: _sub(t, r'^comp_insts\s*=.*$', "comp_insts = [1, 2]"),
    "missing_launch": lambda t: _sub(t, r"^blocks\s*=.*\n", ""),
    "unknown_count": lambda t: _sub(t, r'^(comp_insts\s*=.*)$', '\\1\nbogus_insts = "1"'),
    "bad_param_name": lambda t: _sub(t, r"^N = \{", '"N x" = {'),
    "values_empty": lambda t: _sub(t, r"^BLOCK = \{ values = \[[^\]]*\]", "BLOCK = { values = []"),
    "values_string": lambda t: _sub(t, r"^BLOCK = \{ values = \[[^\]]*\]", 'BLOCK = { values = ["a", "b"]'),
    "values_inf": lambda t: _sub(t, r"^BLOCK = \{ values = \[[^\]]*\]", "BLOCK = { values = [32, inf]"),
    "default_out": lambda t: _sub(t, r"default = 256", "default = 300"),
    "min_bigint": lambda t: _sub(t, r"min = 1,", "min = " + "9" * 400 + ","),
    "version": lambda t: _sub(t, r"^format_version\s*=\s*1", "format_version = 3"),
    "constraint_bad": lambda t: t + '\n[space]\nconstraints = ["BLOCK.__class__"]\n',
    "constraint_type": lambda t: t + '\n[space]\nconstraints = "BLOCK > 1"\n',
    "deep": lambda t: t + "\nnotes2 = " + "[" * 3000 + "]" * 3000 + "\n",
    "big": lambda t: t + "\n#" + "x" * (2 << 20) + "\n",
    "binary": lambda t: "\x00\x01\x02" + t,
    "huge_space": lambda t: _sub(t, r"^\[launch\]", "".join(
        f"X{i} = {{ values = [{', '.join(str(v) for v in range(1000))}], default = 0 }}\n" for i in range(4))
        + "\n[launch]"),
}


def _special(w: Path) -> None:
    """Files that are not regular: a FIFO, a folder, a symlink loop, a dangling link, sparse giants."""
    os.mkfifo(w / "fifo.json")
    os.mkfifo(w / "fifo.toml")
    os.mkfifo(w / "fifo.csv")
    (w / "adir.toml").mkdir()
    (w / "adir.csv").mkdir()
    (w / "adir.json").mkdir()
    os.symlink("loop.toml", w / "loop.toml")
    os.symlink("nowhere.csv", w / "dangling.csv")
    for name in ("sparse.csv", "sparse.json", "sparse.parquet"):
        with open(w / name, "wb") as fh:
            fh.truncate(SPARSE_BYTES)
    (w / "empty.csv").write_bytes(b"")
    (w / "empty.json").write_bytes(b"")
    (w / "binary.csv").write_bytes(bytes(range(256)) * 8)
    (w / "latin1.csv").write_bytes("kernel,gpu,size.N,time_ms,status\nm\xe9,titan-v,1,1,ok\n".encode("latin-1"))


def _toml(w: Path) -> None:
    gpu_text = Path(load_gpu("titan-v").path).read_text()
    kern_text = Path(load_kernel("seed004-matvec").path).read_text()
    (w / "gpu_ok.toml").write_text(gpu_text)
    (w / "kern_ok.toml").write_text(kern_text)
    for name, make in GPU_VARIANTS.items():
        (w / f"gpu_{name}.toml").write_text(make(gpu_text))
    for name, make in KERNEL_VARIANTS.items():
        (w / f"kern_{name}.toml").write_text(make(kern_text))


def _sweeps(w: Path) -> None:
    text = TITANV_SWEEP.read_text()
    (w / "sweep_ok.csv").write_text(text)
    lines = text.splitlines()
    (w / "sweep_one.csv").write_text(  # one kernel, GPU and problem size: what a Kernel Tuner cache holds
        "kernel,gpu,size.N,config.BLOCK,time_ms,status\nseed004-matvec,titan-v,4096,128,0.5,ok\n"
        "seed004-matvec,titan-v,4096,256,0.4,ok\n")
    header, rows = lines[0], lines[1:]
    (w / "sweep_dupcol.csv").write_text(header + ",size.N\n" + "\n".join(r + ",5" for r in rows) + "\n")
    cols = header.split(",")
    n_i, t_i = cols.index("size.N"), cols.index("time_ms")

    def edit(i: int, col: int, value: str) -> str:
        cells = rows[i].split(",")
        cells[col] = value
        return "\n".join([header, *rows[:i], ",".join(cells), *rows[i + 1:]]) + "\n"

    (w / "sweep_negsize.csv").write_text(edit(3, n_i, "-5"))
    (w / "sweep_infsize.csv").write_text(edit(3, n_i, "inf"))
    (w / "sweep_inftime.csv").write_text(edit(3, t_i, "inf"))
    (w / "sweep_negtime.csv").write_text(edit(3, t_i, "-1"))
    (w / "sweep_strtime.csv").write_text(edit(3, t_i, "fast"))
    (w / "sweep_unknown_gpu.csv").write_text(text.replace("titan-v", "gtx-9999"))
    (w / "sweep_nocol.csv").write_text("\n".join(",".join(r.split(",")[1:]) for r in lines) + "\n")
    (w / "sweep_header.csv").write_text(header + "\n")
    (w / "sweep_dups.csv").write_text(text + rows[0] + "\n")
    (w / "sweep_ragged.csv").write_text(text + rows[0] + ",1,2,3\n")
    (w / "sweep_bomb.csv.gz").write_bytes(_zeros_gzip(BOMB_BYTES, b"seed004-matvec,titan-v,1,1,ok\n"))
    (w / "sweep_trunc.csv.gz").write_bytes(gzip.compress(text.encode())[:-20])
    (w / "sweep_cells.csv").write_bytes(b"a,b,c,d\n" + b"1,2,3,4\n" * 6_000_000)
    (w / "sweep_bad.parquet").write_bytes(b"PAR1" + b"\x00" * 100 + b"PAR1")
    (w / "sweep_sidecar.csv").write_text(text)
    (w / "sweep_sidecar.csv.meta.json").write_text(json.dumps({"sweep_format": 1, "csv_sha256": "0" * 64,
                                                                "provenance": {}}))
    (w / "sweep_sidecar_deep.csv").write_text(text)
    (w / "sweep_sidecar_deep.csv.meta.json").write_text("[" * 100_000 + "]" * 100_000)
    (w / "sweep_sidecar_fifo.csv").write_text(text)
    os.mkfifo(w / "sweep_sidecar_fifo.csv.meta.json")
    (w / "rows_ok.csv").write_text("kernel,gpu,size.N\nseed004-matvec,titan-v,2048\nseed004-matvec,titan-v,8192\n")
    (w / "rows_nan.csv").write_text("kernel,gpu,size.N\nseed004-matvec,titan-v,\n")
    (w / "rows_inf.csv").write_text("kernel,gpu,size.N\nseed004-matvec,titan-v,inf\n")
    (w / "rows_neg.csv").write_text("kernel,gpu,size.N\nseed004-matvec,titan-v,-4\n")
    (w / "rows_str.csv").write_text("kernel,gpu,size.N\nseed004-matvec,titan-v,big\n")
    (w / "rows_dupcol.csv").write_text("kernel,gpu,size.N,size.N\nseed004-matvec,titan-v,1,2\n")
    (w / "rows_nogpu.csv").write_text("kernel,size.N\nseed004-matvec,1\n")
    (w / "rows_blank.csv").write_text("kernel,gpu,size.N\nseed004-matvec,,2\n")
    (w / "rows_unknown_kernel.csv").write_text("kernel,gpu,size.N\nnokernel,titan-v,2\n")


def _imports(w: Path) -> None:
    kt = (SWEEP_FIXTURES / "kt_pnpoly_rtx3060.json").read_text()
    (w / "kt_ok.json").write_text(kt)
    (w / "kt_trunc.json").write_text(kt[: len(kt) // 3])
    (w / "kt_list.json").write_text("[1, 2, 3]")
    (w / "kt_deep.json").write_text("[" * 200_000 + "]" * 200_000)
    (w / "kt_containers.json").write_text("[" + ",".join(["[]"] * 2_100_000) + "]")
    (w / "kt_nan.json").write_text(re.sub(r'"time": [0-9.]+', '"time": NaN', kt, count=1))
    (w / "kt_neg.json").write_text(re.sub(r'"time": [0-9.]+', '"time": -3.5', kt, count=1))
    (w / "kt_big.json").write_text(re.sub(r'"time": [0-9.]+', '"time": 1e999', kt, count=1))
    (w / "kt_bigint.json").write_text(re.sub(r'"time": [0-9.]+', '"time": ' + "9" * 5000, kt, count=1))
    (w / "kt_nokeys.json").write_text('{"cache": {}}')
    (w / "kt_bomb.json.gz").write_bytes(_zeros_gzip(BOMB_BYTES, b"                "))
    (w / "kt_trunc.json.gz").write_bytes(gzip.compress(kt.encode())[:-30])
    ktt = (SWEEP_FIXTURES / "ktt_coulomb_gtx1070.json").read_text()
    (w / "ktt_ok.json").write_text(ktt)
    (w / "ktt_trunc.json").write_text(ktt[: len(ktt) // 2])
    (w / "ktt_list.json").write_text("[]")
    (w / "ktt_deep.json").write_text('{"Results": ' + "[" * 200_000 + "]" * 200_000 + "}")
    (w / "ktt_bomb.json.gz").write_bytes(_zeros_gzip(BOMB_BYTES, b"    "))
    uci = (SWEEP_FIXTURES / "uci_sgemm_head.csv").read_text()
    (w / "uci_ok.csv").write_text(uci)
    (w / "uci_bomb.zip").write_bytes(_zip_bomb(BOMB_BYTES))
    (w / "uci_corrupt.zip").write_bytes(b"PK\x03\x04" + b"\x00" * 200)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("readme.txt", "no csv here")
    (w / "uci_nocsv.zip").write_bytes(buf.getvalue())
    (w / "uci_dupcol.csv").write_text(uci.splitlines()[0] + ",MWG\n" + "\n".join(
        r + ",1" for r in uci.splitlines()[1:]) + "\n")
    (w / "uci_negtime.csv").write_text(uci.replace("115.26", "-115.26"))
    aiwc = (SWEEP_FIXTURES / "aiwc_full_dat_cut.csv").read_text()
    (w / "aiwc_ok.csv").write_text(aiwc)
    (w / "aiwc_dupcol.csv").write_text(aiwc.splitlines()[0] + ",size\n" + "\n".join(
        r + ",x" for r in aiwc.splitlines()[1:]) + "\n")
    (w / "aiwc_trunc.csv").write_text(aiwc.splitlines()[0][:50] + "\n")
    shutil.copytree(SWEEP_FIXTURES / "neusight", w / "neusight_ok")
    (w / "neusight_empty").mkdir()
    bad = w / "neusight_bad" / "bmm"
    bad.mkdir(parents=True)
    (bad / "x.csv").write_bytes(b"\xff\xfe garbage")
    (w / "csv_ok.csv").write_text("n,bs,time\n1024,128,0.5\n2048,128,0.9\n4096,256,1.7\n")
    (w / "csv_dupcol.csv").write_text("n,n,time\n1024,2048,0.5\n")
    (w / "csv_negtime.csv").write_text("n,bs,time\n1024,128,-0.5\n")
    (w / "csv_naninf.csv").write_text("n,bs,time\n1024,128,inf\n")
    (w / "csv_bomb.csv.gz").write_bytes(_zeros_gzip(BOMB_BYTES, b"1024,128,0.5\n"))


def build(w: Path) -> None:
    """Make every input file in ``w`` (an empty folder); the model files come from :func:`model_variants`."""
    (w / "out").mkdir()
    _special(w)
    _toml(w)
    _sweeps(w)
    _imports(w)
    os.symlink("out/target.json", w / "link.json")
    (w / "out" / "target.json").write_text("not overwritten\n")
