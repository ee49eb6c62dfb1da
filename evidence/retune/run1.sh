#!/bin/bash
# UWG = 1: re-tune the one-warpgroup shapes of the suite (bf16, fp16) into a copy of the table
export CUMM_CACHE_DIR=/tmp/cumm_cache PYTHONPATH=.
cp cumm/tuned/h200.json $OUT/h200.json
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv > $OUT/gpu.txt
S3="--shape 128x6144x4096 --shape 128x8192x8192 --shape 128x4096x14336 --shape 16x28672x4096"
S2="--shape 512x4096x4096 --shape 512x4096x14336 --shape 16x128256x4096"
for dt in bf16 fp16; do
  start=$(date +%s)
  timeout 170 python3 -m cumm tune $S3 --dtype $dt --rungs wgmma_swap_ab,wgmma_ws,wgmma_cluster_split_k --max-configs 24 --budget 35 --out $OUT/h200.json > $OUT/tune3_$dt.log 2>&1; echo "rc $? $(( $(date +%s) - start )) s" >> $OUT/tune3_$dt.log
  start=$(date +%s)
  timeout 110 python3 -m cumm tune $S2 --dtype $dt --rungs wgmma_ws,wgmma_cluster_split_k --max-configs 24 --budget 30 --out $OUT/h200.json > $OUT/tune2_$dt.log 2>&1; echo "rc $? $(( $(date +%s) - start )) s" >> $OUT/tune2_$dt.log
  tail -3 $OUT/tune3_$dt.log $OUT/tune2_$dt.log
done
