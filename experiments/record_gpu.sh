#!/usr/bin/env bash
# Record the shipped CUDA benchmark kernels on this machine's NVIDIA GPU, in one session.
#
#   OUT=build/record bash experiments/record_gpu.sh        # needs-gpu (CuPy + an NVIDIA GPU)
#
# Writes $OUT/sweep.parquet (every kernel, provenance in its metadata), $OUT/ncu.parquet
# (Nsight Compute counters of a few configurations, when ncu is present), $OUT/stalls.tar.gz and
# $OUT/log.txt. Rerunning resumes (rows already recorded are skipped). Each step has its own time
# limit so that one slow step cannot eat a short GPU lease; what a step recorded before its limit
# is kept. The steps, in the order of their value:
#   1. one tiny kernel first: if the recorder cannot time anything, stop before spending more;
#   2. the seed-004 kernels at the TITAN V dataset's sizes (datasets/titanv-seed004) and beyond,
#      default configuration: a GPU the shipped models never saw, on sizes they were trained on;
#   3. every kernel's whole configuration space at its default size (docs/record.md "First run");
#   4. configuration x size sweeps of the tuned kernels (ryoo matmul, tiled matmul, reduction);
#   5. Nsight Compute counters of the reduction kernels (descriptor counts against the hardware);
#      NCU=0 leaves them out.
set -u
. "$(dirname "$0")/_record_common.sh"

# 1. one tiny kernel: stop here if nothing can be timed
step 60 "smoke: seed004-vecadd" -- --kernel seed004-vecadd --sizes N=10000000 -o "$SWEEP"
if ! "$PY" - "$SWEEP" >>"$LOG" 2>&1 <<'EOF'
import sys
from hybridperf.sweepfile import read_sweep
d = read_sweep(sys.argv[1])
print(d[["kernel", "size.N", "config.BLOCK", "time_ms", "status", "reason"]].to_string())
sys.exit(0 if (d["status"] == "ok").any() else 1)
EOF
then
    echo "nothing could be timed: stopping (see above)" | tee -a "$LOG"
    exit 1
fi

# 2. the seed-004 kernels at the TITAN V dataset's sizes, and beyond its largest
step 40 "vecadd sizes" -- --kernel seed004-vecadd --sizes N=10000000:100000000:5000000 --space BLOCK=256 -o "$SWEEP"
step 30 "vecadd beyond" -- --kernel seed004-vecadd --sizes N=200000000,400000000,800000000 --space BLOCK=256 -o "$SWEEP"
step 40 "matadd sizes" -- --kernel seed004-matadd --sizes N=1000:20000:1000 --space BLOCK=256 -o "$SWEEP"
step 30 "matadd beyond" -- --kernel seed004-matadd --sizes N=24000,32000,40000 --space BLOCK=256 -o "$SWEEP"
step 90 "matvec sizes" -- --kernel seed004-matvec --sizes N=1024:32768:2048 --space BLOCK=256 -o "$SWEEP"
step 40 "dot sizes" -- --kernel seed004-dot --sizes N=100000000:1150000000:50000000 --space BLOCK=64 -o "$SWEEP"

# 3. every kernel's whole space at its default size
for ks in seed004-vecadd:10000000 seed004-matadd:4096 seed004-matvec:4096 seed004-dot:100000000 \
          seed002-tiled-matmul:2048 bench-ryoo-matmul:2048 bench-reduction:16777216 bench-mb:1048576; do
    step "$([ "${ks%%:*}" = bench-mb ] && echo 120 || echo 60)" "space: ${ks%%:*}" -- --kernel "${ks%%:*}" --sizes "N=${ks##*:}" -o "$SWEEP"
done

# 4. configuration x size sweeps of the tuned kernels
step 60 "ryoo matmul x sizes" -- --kernel bench-ryoo-matmul --sizes N=512,1024,4096 -o "$SWEEP"
step 60 "tiled matmul x sizes" -- --kernel seed002-tiled-matmul --sizes N=512,1024,4096,8192 -o "$SWEEP"
step 60 "reduction x sizes" -- --kernel bench-reduction --sizes N=1048576,4194304,67108864,268435456 -o "$SWEEP"
step 40 "seed004 blocks x sizes" -- --kernel seed004-vecadd --sizes N=1000000,100000000 -o "$SWEEP"
step 40 "matadd blocks x sizes" -- --kernel seed004-matadd --sizes N=2000,8000,16000 -o "$SWEEP"
step 40 "matvec blocks x sizes" -- --kernel seed004-matvec --sizes N=2048,8192,16384 -o "$SWEEP"
step 40 "dot blocks x sizes" -- --kernel seed004-dot --sizes N=200000000,800000000 -o "$SWEEP"
step 60 "mb at fewer threads" -- --kernel bench-mb --sizes N=131072 -o "$SWEEP"
step 60 "ryoo matmul, largest" -- --kernel bench-ryoo-matmul --sizes N=8192 --min-repeats 3 --warmup 1 -o "$SWEEP"

# 5. Nsight Compute counters and stall samples of the reduction kernels (one size, one block)
if [ "${NCU:-1}" = 1 ] && command -v ncu >/dev/null 2>&1; then
    step 90 "ncu: reduction" -- --kernel bench-reduction --sizes N=16777216 --space BLOCK=256 --ncu \
        -o "$OUT/ncu.parquet"
    step 60 "ncu: tiled matmul" -- --kernel seed002-tiled-matmul --sizes N=2048 --ncu -o "$OUT/ncu.parquet"
    for k in seed004-vecadd seed004-matadd seed004-matvec seed004-dot; do
        step 30 "ncu: $k" -- --kernel "$k" --sizes N=4096 --space BLOCK=256 --ncu -o "$OUT/ncu.parquet"
    done
    step 60 "ncu: ryoo matmul" -- --kernel bench-ryoo-matmul --sizes N=2048 --space TILE=16 RECT=1,2,4 UNROLL=1 \
        PREFETCH=0 --ncu -o "$OUT/ncu.parquet"
    [ -d "$OUT/ncu.parquet.stalls" ] && tar -czf "$OUT/stalls.tar.gz" -C "$OUT" ncu.parquet.stalls \
        && rm -rf "$OUT/ncu.parquet.stalls"
fi

"$PY" - "$SWEEP" >>"$LOG" 2>&1 <<'EOF'
import sys
from hybridperf.sweepfile import read_sweep
d = read_sweep(sys.argv[1])
print(d.groupby(["kernel", "status"]).size().to_string())
EOF
echo "done in $SECONDS s" | tee -a "$LOG"
