#!/usr/bin/env bash
# Hardware counters for the upper rungs at 4096^3 (one launch each): shared-memory wavefronts, bank
# conflicts, pipe utilization. Output: $OUT/ncu.csv-like text.
set -uo pipefail
export PYTHONPATH=. PYTHONUNBUFFERED=1 CUPY_CACHE_DIR=/tmp/cupy-cache
M=smsp__inst_executed_op_shared_ld.sum,smsp__inst_executed_op_shared_st.sum,\
l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum,\
l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,\
sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed,\
sm__warps_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,gpu__time_duration.sum
while read -r kernel cfg; do
  echo "=== $kernel $cfg"
  ncu --clock-control none -k regex:cumm_ --launch-skip 2 --launch-count 1 --metrics "$M" \
      python3 bench/ncu_one.py $kernel $cfg 2>&1 | grep -E "^\s+(smsp|l1tex|sm__|gpu__)" 
done <<LIST
${NCU_LIST:-vectorized BK=16
bank_conflict_free BK=16
warptile
double_buffer}
LIST
