#!/usr/bin/env bash
# Record a fresh hold-out of the shipped CUDA kernels: every kernel's whole configuration space at
# sizes that datasets/<gpu>-cuda-bench never recorded, some between its sizes and some beyond the
# largest. Nothing is trained on these rows; experiments/holdout_check.py predicts them.
#
#   OUT=build/holdout bash experiments/record_holdout.sh        # needs-gpu (CuPy + an NVIDIA GPU)
#   BEYOND=0 OUT=... bash experiments/record_holdout.sh          # without the two N = 12288 matmuls (~2 min)
#
# Writes $OUT/sweep.parquet (provenance in its metadata) and $OUT/log.txt; rerunning resumes.
set -u
. "$(dirname "$0")/_record_common.sh"

# between the recorded sizes, then beyond the largest (x1.5 to x2)
step 30 "vecadd" -- --kernel seed004-vecadd --sizes N=3000000,300000000,1600000000 -o "$SWEEP"
step 30 "matadd" -- --kernel seed004-matadd --sizes N=2500,12500,28000,56000 -o "$SWEEP"
step 30 "matvec" -- --kernel seed004-matvec --sizes N=6144,12288,24576,49152 -o "$SWEEP"
step 40 "dot" -- --kernel seed004-dot --sizes N=50000000,425000000,2000000000 -o "$SWEEP"
step 60 "reduction" -- --kernel bench-reduction --sizes N=8388608,33554432,134217728,536870912 -o "$SWEEP"
step 60 "tiled matmul" -- --kernel seed002-tiled-matmul --sizes N=1536,3072,6144 -o "$SWEEP"
step 60 "ryoo matmul" -- --kernel bench-ryoo-matmul --sizes N=1536,3072,6144 -o "$SWEEP"
step 90 "mb" -- --kernel bench-mb --sizes N=262144,2097152 -o "$SWEEP"
step 10 "matvec across the wave step" -- --kernel seed004-matvec \
    --sizes N=32768,33792,34048,35840,40960,45056,57344,65536 --space BLOCK=256 -o "$SWEEP"
[ "${BEYOND:-1}" = 1 ] && step 60 "tiled matmul, beyond" -- --kernel seed002-tiled-matmul --sizes N=12288 --min-repeats 3 --warmup 1 -o "$SWEEP"
[ "${BEYOND:-1}" = 1 ] && step 100 "ryoo matmul, beyond" -- --kernel bench-ryoo-matmul --sizes N=12288 --min-repeats 3 --warmup 1 -o "$SWEEP"

"$PY" - "$SWEEP" >>"$LOG" 2>&1 <<'PYEOF'
import sys
from hybridperf.sweepfile import read_sweep
d = read_sweep(sys.argv[1])
print(d.groupby(["kernel", "status"]).size().to_string())
PYEOF
echo "done in $SECONDS s" | tee -a "$LOG"
