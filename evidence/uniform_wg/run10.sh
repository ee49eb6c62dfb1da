#!/bin/bash
# A/B: the warpgroup index through a shuffle (this tree) against the previous kernels (/tmp/old), alternating processes
export PYTHONPATH=.
rm -rf /tmp/old && mkdir -p /tmp/old && cp -r cumm lab /tmp/old/ && cp lab/s69/old/14.cu /tmp/old/cumm/kernels/gemm/14_wgmma_ws/kernel.cu && cp lab/s69/old/16.cu /tmp/old/cumm/kernels/gemm/16_wgmma_cluster_split_k/kernel.cu
export CUMM_CACHE_DIR=/tmp/cumm_cache
for n in ks2 1wg 2wg auto; do
  ( python3 lab/s69/few7.py --warm "$n" > /dev/null 2>&1 ) &
  ( python3 lab/s69/few7.py --warm "$n" fp16 > /dev/null 2>&1 ) &
  ( cd /tmp/old && CUMM_CACHE_DIR=/tmp/cumm_cache_old python3 lab/s69/few7.py --warm "$n" > /dev/null 2>&1 ) &
  ( cd /tmp/old && CUMM_CACHE_DIR=/tmp/cumm_cache_old python3 lab/s69/few7.py --warm "$n" fp16 > /dev/null 2>&1 ) &
done
wait
for r in 1 2; do
  timeout 120 python3 lab/s69/few7.py
  ( cd /tmp/old && CUMM_CACHE_DIR=/tmp/cumm_cache_old timeout 120 python3 lab/s69/few7.py )
done
for r in 1 2; do
  timeout 60 python3 lab/s69/few7.py fp16
  ( cd /tmp/old && CUMM_CACHE_DIR=/tmp/cumm_cache_old timeout 60 python3 lab/s69/few7.py fp16 )
done
