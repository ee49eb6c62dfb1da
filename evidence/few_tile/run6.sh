#!/bin/bash
cd "$(dirname "$0")/../.."
export CUMM_CACHE_DIR=/tmp/cumm_cache
M="gpu__time_duration.sum,sm__cycles_elapsed.avg,smsp__cycles_active.avg,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,lts__t_bytes.sum,dram__bytes_read.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size,launch__cluster_dim_x,launch__cluster_dim_y,launch__block_size,launch__shared_mem_per_block_dynamic,sm__warps_active.avg.per_cycle_active,lts__t_sectors_srcunit_tex_lookup_hit.sum,lts__t_sectors_srcunit_tex.sum,gpc__cycles_elapsed.avg.per_second"
for r in long_scoreboard wait barrier membar sleeping no_instruction math_pipe_throttle selected dispatch_stall; do M="$M,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio"; done
PYTHONPATH=. python3 lab/s67/few_launch.py cumm
echo "=== cumm"; timeout 200 ncu --clock-control none -k regex:^cumm_ --launch-skip 4 --launch-count 1 --metrics "$M" env PYTHONPATH=. python3 lab/s67/few_launch.py cumm 2>&1 | grep -E "^\s+(smsp|l1tex|sm__|gpu__|lts|dram|launch|gpc)|ERROR|==PROF== Disconnected|cumm_" | head -40
echo "=== cublas"; timeout 200 ncu --clock-control none -k "regex:^(nvjet|sm90_|cutlass)" --launch-skip 4 --launch-count 1 --metrics "$M" env PYTHONPATH=. python3 lab/s67/few_launch.py torch 2>&1 | grep -E "^\s+(smsp|l1tex|sm__|gpu__|lts|dram|launch|gpc)|ERROR|nvjet|sm90|cutlass" | head -40
