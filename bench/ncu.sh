#!/usr/bin/env bash
# Nsight Compute on one launch of a cumm kernel (the last of a few, bench/ncu_launch.py); clocks left alone.
#
#   bash bench/ncu.sh counters TARGET...  shared-memory traffic and bank conflicts, FMA pipe, warps, instructions
#   bash bench/ncu.sh stalls TARGET...    warp-stall reasons per issued instruction, issue rate, L2 bytes, time
#   bash bench/ncu.sh source TARGET       stall samples per SASS instruction: the 45 most sampled, and
#                                         $OUT/ncu_source.csv (all of them)
#
# TARGET as bench/ncu_launch.py takes it: a GEMM rung with overrides (double_buffer, vectorized:BK=16; at
# NCU_N, default 4096), `cublas`, or a chain kernel (fused3_wg as multi_dot picks it, fused3_wg:kw64x32,TMA=0;
# NCU_N default 512). NCU_DTYPE=bfloat16 or float16: GEMM operands of that dtype. Runs from a clone where cumm
# is not installed. OUT defaults to /tmp/cumm-ncu; NCU_S limits each ncu run (default 300 s).
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root" || exit 2
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export CUPY_CACHE_DIR=${CUPY_CACHE_DIR:-/tmp/cupy-cache} CUMM_CACHE_DIR=${CUMM_CACHE_DIR:-/tmp/cumm-cache}
OUT=${OUT:-/tmp/cumm-ncu}
mkdir -p "$OUT"
py=${PYTHON:-python3}
mode=${1:-}
shift || true
[[ -n $mode && $# -gt 0 ]] || { sed -n '2,11p' "$0"; exit 2; }

COUNTERS=smsp__inst_executed_op_shared_ld.sum,smsp__inst_executed_op_shared_st.sum,\
l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum,\
l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,\
sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,\
l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed,\
sm__warps_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,gpu__time_duration.sum
STALLS=""
for r in barrier long_scoreboard short_scoreboard wait math_pipe_throttle mio_throttle lg_throttle not_selected \
    dispatch_stall no_instruction membar sleeping selected branch_resolving drain imc_miss misc tex_throttle; do
    STALLS="$STALLS,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio"
done
STALLS="${STALLS:1},smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,\
sm__warps_active.avg.per_cycle_active,lts__t_bytes.sum,gpu__time_duration.sum"

profile() {  # profile TARGET ncu-options...: ncu on the last of 5 launches of TARGET's kernel
    local target=$1
    shift
    local filter
    filter=$("$py" bench/ncu_launch.py "$target" --print-regex) || return 1
    timeout "${NCU_S:-300}" ncu --clock-control none -k "$filter" --launch-skip 4 --launch-count 1 "$@" \
        "$py" bench/ncu_launch.py "$target" ${NCU_N:+--n "$NCU_N"} ${NCU_DTYPE:+--dtype "$NCU_DTYPE"} --calls 5
}

case $mode in
counters | stalls)
    [[ $mode == counters ]] && metrics=$COUNTERS || metrics=$STALLS
    for target in "$@"; do
        echo "=== $mode $target"
        profile "$target" --metrics "$metrics" 2>&1 | grep -E "^\s+(smsp|l1tex|sm__|gpu__|lts)|ERROR|Error"
    done
    ;;
source)
    target=$1
    echo "=== source $target"
    profile "$target" --section SourceCounters --section WarpStateStats -f -o "$OUT/ncu_source" \
        >"$OUT/ncu_source_run.log" 2>&1
    echo "ncu rc=$?"
    tail -3 "$OUT/ncu_source_run.log"
    ncu -i "$OUT/ncu_source.ncu-rep" --page source --csv --print-source sass >"$OUT/ncu_source.csv" || exit 1
    "$py" - "$OUT/ncu_source.csv" <<'PY'
import csv
import sys

rows = list(csv.reader(open(sys.argv[1])))
head_i = next(i for i, r in enumerate(rows) if any("Source" in c for c in r))
head = rows[head_i]
src = next(i for i, c in enumerate(head) if c.strip() == "Source")
samp = [i for i, c in enumerate(head) if "Sampling" in c and "All" in c] or [i for i, c in enumerate(head) if "Sampling" in c]
addr = next((i for i, c in enumerate(head) if c.strip() == "Address"), 0)
k = samp[0]


def num(s):
    try:
        return float(s.replace(",", ""))
    except ValueError:
        return 0.0


body = [r for r in rows[head_i + 1 :] if len(r) > k]
total = sum(num(r[k]) for r in body) or 1.0
print(f"{head[k]}: {total:.0f} samples")
for r in sorted(body, key=lambda r: -num(r[k]))[:45]:
    print(f"{num(r[k]):7.0f} {100 * num(r[k]) / total:5.1f}%  {r[addr]}  {r[src][:90]}")
PY
    ;;
*)
    sed -n '2,11p' "$0"
    exit 2
    ;;
esac
