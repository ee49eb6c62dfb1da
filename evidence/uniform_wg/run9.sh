#!/bin/bash
# ncu stall reasons at 1024 x 1024 x 8192: one- and two-warpgroup 128 x 64 tiles against cuBLAS
export CUMM_CACHE_DIR=/tmp/cumm_cache PYTHONPATH=.
M="gpu__time_duration.sum,sm__cycles_elapsed.avg,smsp__cycles_active.avg,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,smsp__warps_active.avg.per_cycle_active,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,smsp__inst_executed_op_shared_st.sum"
for r in long_scoreboard wait barrier membar sleeping no_instruction math_pipe_throttle selected dispatch_stall short_scoreboard mio_throttle lg_throttle drain imc_miss branch_resolving misc tex_throttle not_selected; do M="$M,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio"; done
for c in 128,64,8,1,1,0 128,64,8,2,1,0; do ( python3 lab/s69/launch5.py $c > /dev/null 2>&1 ) & done; wait
for c in 128,64,8,1,1,0 128,64,8,2,1,0; do
  echo "=== $c"; timeout 100 ncu --clock-control none -k regex:^cumm_ --launch-skip 4 --launch-count 1 --metrics "$M" python3 lab/s69/launch5.py $c 2>&1 | grep -E "^\s+(sm__|gpu__|smsp|l1tex)|ERROR|  cumm_" | sed 's/  */ /g'
done
echo "=== cublas"; timeout 100 ncu --clock-control none -k "regex:^(nvjet|sm90_|cutlass)" --launch-skip 4 --launch-count 1 --metrics "$M" python3 lab/s69/launch5.py torch 2>&1 | grep -E "^\s+(sm__|gpu__|smsp|l1tex)|ERROR|nvjet" | sed 's/  */ /g'
