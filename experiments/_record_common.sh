# Sourced by experiments/record_gpu.sh and experiments/record_holdout.sh: the output folder, the log with
# the device's state, and step(), one `hybridperf record` under a time limit.
OUT=${OUT:?set OUT to the folder to write into}
PY=${PY:-python3}
mkdir -p "$OUT"
LOG="$OUT/log.txt"
SWEEP="$OUT/sweep.parquet"
export PYTHONUNBUFFERED=1

step() {  # step LIMIT_S DESCRIPTION -- ARGS...: one `hybridperf record` under a time limit
    local limit=$1 what=$2
    shift 3
    local t0=$SECONDS
    echo "== $what (limit ${limit}s)" | tee -a "$LOG"
    timeout --signal=INT --kill-after=10 "$limit" \
        "$PY" -c 'import sys; from hybridperf.cli import main; sys.exit(main())' record "$@" >>"$LOG" 2>&1
    local rc=$?
    echo "   rc=$rc in $((SECONDS - t0)) s" | tee -a "$LOG"
    return $rc
}

{
    date -u
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit,temperature.gpu \
        --format=csv 2>&1
    "$PY" -c 'import cupy; print("cupy", cupy.__version__, "devices", cupy.cuda.runtime.getDeviceCount())' 2>&1
} >>"$LOG"
