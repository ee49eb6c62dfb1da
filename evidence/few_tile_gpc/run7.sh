#!/bin/bash
export CUMM_CACHE_DIR=/tmp/cumm_cache PYTHONPATH=.
for n in "1wg gm1" "1wg gm4" "2wg gm1" auto; do
  ( python3 lab/s69/few5.py --warm "$n" > "$OUT/warm_$(echo $n | tr ' ' _).log" 2>&1 ) &
  ( python3 lab/s69/few5.py --warm "$n" fp16 > "$OUT/warm16_$(echo $n | tr ' ' _).log" 2>&1 ) &
done
wait
timeout 250 python3 lab/s69/few5.py > $OUT/few_bf16.log 2>&1; cat $OUT/few_bf16.log
timeout 250 python3 lab/s69/few5.py fp16 > $OUT/few_fp16.log 2>&1; cat $OUT/few_fp16.log
