#!/bin/bash
# ncu at 1024 x 1024 x 8192: the L2 request coalescer (hardware / multicast) for single blocks, clusters and cuBLAS
export CUMM_CACHE_DIR=/tmp/cumm_cache PYTHONPATH=.
M="gpu__time_duration.sum,sm__cycles_elapsed.avg,lts__t_sectors_srcunit_tex.sum,lrc__average_xbar2gpc_sectors_op_read.ratio,lrc__average_xbar2gpc_sectors_op_read_coalescing_achieved_type_hardware.ratio,lrc__average_xbar2gpc_sectors_op_read_coalescing_achieved_type_programmatic.ratio,lrc__lrc2xbar_sectors_op_read.sum,l1tex__m_xbar2l1tex_read_sectors_mem_global_op_tma_ld_dest_multicast.sum,l1tex__m_xbar2l1tex_read_sectors.sum"
for c in 128,64,8,1,1,0 128,64,8,2,1,0 128,64,8,2,2,0 auto; do
  ( python3 lab/s69/launch5.py $c > /dev/null 2>&1 ) &
done
wait
for c in 128,64,8,1,1,0 128,64,8,2,1,0 128,64,8,2,2,0 auto; do
  echo "=== $c"; timeout 100 ncu --clock-control none -k regex:^cumm_ --launch-skip 4 --launch-count 1 --metrics "$M" python3 lab/s69/launch5.py $c 2>&1 | grep -E "^\s+(sm__|gpu__|lts|lrc|l1tex)|ERROR|  cumm_" | sed 's/  */ /g'
done
echo "=== cublas"; timeout 100 ncu --clock-control none -k "regex:^(nvjet|sm90_|cutlass)" --launch-skip 4 --launch-count 1 --metrics "$M" python3 lab/s69/launch5.py torch 2>&1 | grep -E "^\s+(sm__|gpu__|lts|lrc|l1tex)|ERROR|nvjet|sm90" | sed 's/  */ /g'
