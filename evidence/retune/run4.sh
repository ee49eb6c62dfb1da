#!/bin/bash
# arbitration of the re-tune's contested choices (UWG = 1 everywhere), three alternating runs per dtype
export CUMM_CACHE_DIR=/tmp/cumm_cache PYTHONPATH=.
( python3 lab/s70/ab.py bf16 --warm > $OUT/warm_bf16.log 2>&1 ) &
( python3 lab/s70/ab.py fp16 --warm > $OUT/warm_fp16.log 2>&1 ) &
wait; cat $OUT/warm_*.log
for r in 1 2 3; do for dt in bf16 fp16; do timeout 90 python3 lab/s70/ab.py $dt; done; done
