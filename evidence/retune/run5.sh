#!/bin/bash
# the tuner with the shape-adjusted seeds and the side-by-side race: its GPU tests, then the contested shapes again
export CUMM_CACHE_DIR=/tmp/cumm_cache PYTHONPATH=.
cp lab/s70/h200_t3.json $OUT/h200.json
timeout 90 python3 -m pytest -q -x tests/test_tune.py -k "race_side_by_side or half_rung_and_auto" > $OUT/tests.log 2>&1; echo "rc $?" >> $OUT/tests.log; tail -3 $OUT/tests.log
A="--shape 512x5120x5120 --shape 1024x1024x8192 --shape 128x8192x8192 --shape 256x4096x14336"
B="--shape 3000x5000x2000 --shape 8192x8192x8192 --shape 8192x8192x256 --shape 65536x128x2048"
for dt in bf16 fp16; do s=$(date +%s)
  timeout 80 python3 -m cumm tune $A --dtype $dt --rungs wgmma_ws,wgmma_cluster_split_k --max-configs 24 --budget 30 --out $OUT/h200.json > $OUT/a_$dt.log 2>&1; echo "rc $? $(( $(date +%s) - s )) s" >> $OUT/a_$dt.log
  s=$(date +%s)
  timeout 90 python3 -m cumm tune $B --dtype $dt --rungs wgmma_ws,wgmma_pingpong --max-configs 24 --budget 30 --out $OUT/h200.json > $OUT/b_$dt.log 2>&1; echo "rc $? $(( $(date +%s) - s )) s" >> $OUT/b_$dt.log
  grep -E "^tuned|^rc|race" $OUT/a_$dt.log $OUT/b_$dt.log
done
