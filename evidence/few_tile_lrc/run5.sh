#!/bin/bash
export CUMM_CACHE_DIR=/tmp/cumm_cache PYTHONPATH=.
for n in "1wg gm2" "1wg gm4" "1wg gm16" "2wg gm2" "2wg gm4" "2wg gm8" "2wg gm16" auto; do
  ( python3 lab/s69/few3.py --warm "$n" > "$OUT/warm_$(echo $n | tr ' ' _).log" 2>&1 ) &
  ( python3 lab/s69/few3.py --warm "$n" fp16 > "$OUT/warm16_$(echo $n | tr ' ' _).log" 2>&1 ) &
done
wait
cat $OUT/warm*.log | grep -v "^$" | head -20
timeout 200 python3 lab/s69/few3.py > $OUT/few_bf16.log 2>&1; cat $OUT/few_bf16.log
timeout 150 python3 lab/s69/few3.py fp16 > $OUT/few_fp16.log 2>&1; cat $OUT/few_fp16.log
