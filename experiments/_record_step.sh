# Sourced by experiments/record_gpu.sh and experiments/record_holdout.sh (needs LOG and PY set).
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
