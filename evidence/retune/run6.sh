#!/bin/bash
# the bf16 and fp16 suites on the re-tuned table (UWG = 1, shape-adjusted seeds, side-by-side race)
export CUMM_CACHE_DIR=/tmp/cumm_cache PYTHONPATH=.
cp lab/s70/h200_t4.json cumm/tuned/h200.json; rm -f /tmp/cumm_cache/tuned.json
( timeout 150 python3 -m cumm bench --suite llm --dtype bf16 --runs 1 > $OUT/warm_bf16.log 2>&1 ) &
( timeout 150 python3 -m cumm bench --suite llm --dtype fp16 --runs 1 > $OUT/warm_fp16.log 2>&1 ) &
wait
for dt in bf16 fp16; do
  timeout 150 python3 -m cumm bench --suite llm --dtype $dt --runs 3 --json $OUT/h200_suite_$dt.json --markdown $OUT/h200_suite_$dt.md > $OUT/suite_$dt.log 2>&1; echo "rc $?" >> $OUT/suite_$dt.log; tail -3 $OUT/suite_$dt.log
done
