export PYTHONPATH=. CUMM_CACHE_DIR=/tmp/cumm-cache
M=""
for r in barrier long_scoreboard short_scoreboard wait math_pipe_throttle mio_throttle lg_throttle not_selected dispatch_stall no_instruction membar sleeping selected; do M="$M,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio"; done
M="${M:1},smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.per_cycle_active,gpu__time_duration.sum"
for cfg in "KS=1" "KS=4"; do
echo "=== tc32x32 $cfg"
timeout 120 ncu --clock-control none -k regex:fused3_tc --launch-skip 3 --launch-count 1 --metrics "$M" python3 -c "
import cupy
from cumm import _chain
n = 512
x = [cupy.random.standard_normal((n, n), dtype=cupy.float32) for _ in range(3)]
e = cupy.empty((n, n), cupy.float32)
cfg = dict(_chain.TC_CONFIGS['tc32x32'], $cfg)
for _ in range(5): _chain._fused3_tc(*x, e, cfg, 0)
cupy.cuda.Device().synchronize()
" 2>&1 | grep -E "^\s+(smsp|sm__|gpu__)" 
done
