#!/bin/bash
# UWG = 1: re-tune the remaining half-precision shapes, each group with the rungs it raced before
export CUMM_CACHE_DIR=/tmp/cumm_cache PYTHONPATH=.
cp lab/s70/h200_t1.json $OUT/h200.json
G2="--shape 128x4096x4096 --shape 256x4096x14336 --shape 16x4096x4096 --shape 16x4096x14336 --shape 16x6144x4096 --shape 32x6144x4096 --shape 64x4096x14336 --shape 64x28672x4096"
G3="--shape 1024x1024x1024 --shape 512x5120x5120 --shape 128x128256x4096 --shape 256x8192x8192 --shape 512x512x512 --shape 4096x128x4096 --shape 8192x256x8192"
G4="--shape 2048x2048x2048 --shape 3000x5000x2000 --shape 4096x4096x4096 --shape 8192x8192x8192 --shape 4096x4096x1024 --shape 8192x14336x1024 --shape 8192x8192x256 --shape 16384x16384x64 --shape 65536x128x2048"
G1="--shape 1x4096x4096 --shape 1x4096x14336 --shape 1x6144x4096 --shape 1x14336x4096 --shape 1x28672x4096 --shape 1x128256x4096"
t() { local name=$1 lim=$2; shift 2; local s=$(date +%s)
  timeout $lim python3 -m cumm tune "$@" --max-configs 24 --budget 30 --out $OUT/h200.json > $OUT/$name.log 2>&1
  echo "rc $? $(( $(date +%s) - s )) s" >> $OUT/$name.log; grep -E "^tuned|^rc" $OUT/$name.log; }
for dt in bf16 fp16; do
  t g2_$dt 100 $G2 --dtype $dt --rungs wgmma_swap_ab,wgmma_ws,wgmma_cluster_split_k
  t g3_$dt 90 $G3 --dtype $dt --rungs wgmma_ws,wgmma_cluster_split_k
  t g4_$dt 100 $G4 --dtype $dt --rungs wgmma_ws,wgmma_pingpong
done
