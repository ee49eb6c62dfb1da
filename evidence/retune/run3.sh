#!/bin/bash
# UWG = 1: re-tune the M = 1 shapes' wgmma entries, then the bf16 and fp16 suites on the re-tuned table
export CUMM_CACHE_DIR=/tmp/cumm_cache PYTHONPATH=.
cp lab/s70/h200_t2.json $OUT/h200.json
G1="--shape 1x4096x4096 --shape 1x4096x14336 --shape 1x6144x4096 --shape 1x14336x4096 --shape 1x28672x4096 --shape 1x128256x4096"
for dt in bf16 fp16; do s=$(date +%s)
  timeout 80 python3 -m cumm tune $G1 --dtype $dt --rungs skinny16,wgmma_ws,wgmma_cluster_split_k --max-configs 24 --budget 30 --out $OUT/h200.json > $OUT/g1_$dt.log 2>&1
  echo "rc $? $(( $(date +%s) - s )) s" >> $OUT/g1_$dt.log; grep -E "^tuned|^rc" $OUT/g1_$dt.log; done
cp $OUT/h200.json cumm/tuned/h200.json; rm -f /tmp/cumm_cache/tuned.json
( timeout 150 python3 -m cumm bench --suite llm --dtype bf16 --runs 1 > $OUT/warm_bf16.log 2>&1 ) &
( timeout 150 python3 -m cumm bench --suite llm --dtype fp16 --runs 1 > $OUT/warm_fp16.log 2>&1 ) &
wait
for dt in bf16 fp16; do
  timeout 150 python3 -m cumm bench --suite llm --dtype $dt --runs 3 --json $OUT/h200_suite_$dt.json --markdown $OUT/h200_suite_$dt.md > $OUT/suite_$dt.log 2>&1; echo "rc $?" >> $OUT/suite_$dt.log; tail -3 $OUT/suite_$dt.log
done
