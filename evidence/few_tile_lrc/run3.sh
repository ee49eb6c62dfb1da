#!/bin/bash
export CUMM_CACHE_DIR=/tmp/cumm_cache PYTHONPATH=.
for n in "ws 128x64 1wg st8" "ws 128x64 1wg st8 gm8" "swap 128x64 st8" "swap 128x64 st12" "swap 128x128 st6 ks2" "swap 64x128 st8" auto; do
  ( python3 lab/s69/few2.py --warm "$n" > "$OUT/warm_$(echo $n | tr ' ' _).log" 2>&1 ) &
  ( python3 lab/s69/few2.py --warm "$n" fp16 > "$OUT/warm16_$(echo $n | tr ' ' _).log" 2>&1 ) &
done
ncu --query-metrics --chip gh100 2>&1 | grep -i "^lrc\|multicast" | head -30 > $OUT/lrc.txt
wait
cat $OUT/lrc.txt
cat $OUT/warm*.log | grep -v "^$" | head -40
timeout 200 python3 lab/s69/few2.py > $OUT/few_bf16.log 2>&1; cat $OUT/few_bf16.log
timeout 150 python3 lab/s69/few2.py fp16 > $OUT/few_fp16.log 2>&1; cat $OUT/few_fp16.log
