#!/bin/bash
# ncu at 1024 x 1024 x 8192: L2 traffic by source (the other partition's fabric), for clustered against single blocks
export CUMM_CACHE_DIR=/tmp/cumm_cache PYTHONPATH=.
M="gpu__time_duration.sum,sm__cycles_elapsed.avg,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,lts__t_bytes.sum,lts__t_sectors.sum,lts__t_requests.sum,lts__t_sectors_srcunit_tex.sum,lts__t_sectors_srcunit_tex_lookup_hit.sum,lts__t_sectors_srcunit_ltcfabric.sum,lts__t_sectors_srcunit_ltcfabric_lookup_hit.sum,lts__t_sectors_srcnode_gpc.sum,lts__t_requests_srcunit_tex.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,launch__cluster_dim_x,gpc__cycles_elapsed.avg.per_second,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio"
for c in 128,64,8,1,1,0 128,64,8,2,1,0 128,64,8,2,2,0 128,128,6,2,2,4 auto; do
  ( python3 lab/s69/launch5.py $c > /dev/null 2>&1 ) &
done
wait
for c in 128,64,8,1,1,0 128,64,8,2,1,0 128,64,8,2,2,0 128,128,6,2,2,4 auto; do
  echo "=== $c"; timeout 100 ncu --clock-control none -k regex:^cumm_ --launch-skip 4 --launch-count 1 --metrics "$M" python3 lab/s69/launch5.py $c 2>&1 | grep -E "^\s+(sm__|gpu__|lts|launch|gpc|smsp)|ERROR|  cumm_" | sed 's/  */ /g'
done
echo "=== cublas"; timeout 100 ncu --clock-control none -k "regex:^(nvjet|sm90_|cutlass)" --launch-skip 4 --launch-count 1 --metrics "$M" python3 lab/s69/launch5.py torch 2>&1 | grep -E "^\s+(sm__|gpu__|lts|launch|gpc|smsp)|ERROR|nvjet|sm90" | sed 's/  */ /g'
