# ncu stall reasons of fused3_wg at n = 512 for the configurations given as arguments (dicts of overrides)
export PYTHONPATH=. CUMM_CACHE_DIR=/tmp/cumm-cache
M=""
for r in barrier long_scoreboard short_scoreboard wait math_pipe_throttle mio_throttle lg_throttle not_selected dispatch_stall no_instruction membar sleeping selected branch_resolving drain imc_miss misc tex_throttle; do M="$M,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio"; done
M="${M:1},smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.per_cycle_active,gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,lts__t_bytes.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,smsp__cycles_active.avg"
for cfg in "$@"; do
echo "=== fused3_wg $cfg"
timeout 120 ncu --clock-control none -k regex:fused3_wg --launch-skip 3 --launch-count 1 --metrics "$M" python3 bench/ncu_launch.py "$cfg" 2>&1 | grep -E "^\s+(smsp|sm__|gpu__|lts|l1tex)"
done
