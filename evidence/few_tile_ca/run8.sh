#!/bin/bash
export CUMM_CACHE_DIR=/tmp/cumm_cache PYTHONPATH=.
for n in "1wg gm4" "2wg ca gm8" "2wg ca gm4" "2wg ca gm1" "1wg ca gm8" auto; do
  ( python3 lab/s69/few6.py --warm "$n" > "$OUT/warm_$(echo $n | tr ' ' _).log" 2>&1 ) &
done
wait
cat $OUT/warm*.log | grep -v "^$" | head -20
timeout 200 python3 lab/s69/few6.py > $OUT/few_bf16.log 2>&1; cat $OUT/few_bf16.log
M="gpu__time_duration.sum,sm__cycles_elapsed.avg,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,lts__t_sectors_srcunit_tex.sum,lrc__average_xbar2gpc_sectors_op_read_coalescing_achieved_type_hardware.ratio,lrc__average_xbar2gpc_sectors_op_read_coalescing_achieved_type_programmatic.ratio"
for c in 128,64,8,2,2,0,1,8 128,64,8,2,2,0,1,4; do
  echo "=== $c"; timeout 100 ncu --clock-control none -k regex:^cumm_ --launch-skip 4 --launch-count 1 --metrics "$M" python3 lab/s69/launch5.py $c 2>&1 | grep -E "^\s+(sm__|gpu__|lts|lrc)|ERROR|  cumm_" | sed 's/  */ /g'
done
