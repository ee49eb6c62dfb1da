#!/bin/bash
export CUMM_CACHE_DIR=/tmp/cumm_cache PYTHONPATH=.
for n in "ks2 gm4" "ks2 gm1" "ks2 gm16" "1wg gm1" "1wg cl2 gm1" "2wg gm1" "2wg cl2 gm1" "2wg cl2 gm4" "128x128 cl2 sk gm1" auto; do
  ( python3 lab/s69/few4.py --warm "$n" > "$OUT/warm_$(echo $n | tr ' ' _).log" 2>&1 ) &
done
wait
cat $OUT/warm*.log | grep -v "^$" | head -20
timeout 250 python3 lab/s69/few4.py > $OUT/few_bf16.log 2>&1; cat $OUT/few_bf16.log
