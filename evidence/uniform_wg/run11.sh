#!/bin/bash
# UWG = 1: the tuner at 1024 x 1024 x 8192 (bf16, fp16), GPU tests of the two rungs beside suite warm-ups, the bf16 suite
export CUMM_CACHE_DIR=/tmp/cumm_cache PYTHONPATH=.
cp cumm/tuned/h200.json $OUT/h200.json
for dt in bf16 fp16; do
  timeout 95 python3 -m cumm tune --shape 1024x1024x8192 --dtype $dt --rungs wgmma_ws,wgmma_cluster_split_k --budget 65 --out $OUT/h200.json > $OUT/tune_$dt.log 2>&1; echo "rc $?" >> $OUT/tune_$dt.log; tail -4 $OUT/tune_$dt.log
done
cp $OUT/h200.json cumm/tuned/h200.json
( timeout 150 python3 -m cumm bench --suite llm --dtype bf16 --runs 1 > $OUT/warm_bf16.log 2>&1 ) &
( timeout 150 python3 -m cumm bench --suite llm --dtype fp16 --runs 1 > $OUT/warm_fp16.log 2>&1 ) &
timeout 140 python3 -m pytest -q -x tests/test_cluster_split_k.py tests/test_half.py -k "wgmma_ws or cluster_split_k or one_consumer" > $OUT/tests.log 2>&1; echo "rc $?" >> $OUT/tests.log; tail -2 $OUT/tests.log
wait
timeout 150 python3 -m cumm bench --suite llm --dtype bf16 --runs 3 --json $OUT/h200_suite_bf16.json --markdown $OUT/h200_suite_bf16.md > $OUT/suite_bf16.log 2>&1; echo "rc $?" >> $OUT/suite_bf16.log; tail -3 $OUT/suite_bf16.log
