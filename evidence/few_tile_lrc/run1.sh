#!/bin/bash
# device run 1: the FP8 torch test left over, then few-tile deep configurations (bf16, fp16)
export CUMM_CACHE_DIR=/tmp/cumm_cache PYTHONPATH=.
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv > $OUT/gpu.txt
for n in "128x128 cl2 sk st4" "128x128 cl2 sk st6" "128x128 cl1 sk st6" "128x256 cl2 sk st4" "128x192 cl2 sk st4" auto; do
  ( python3 lab/s69/few.py --warm "$n" > "$OUT/warm_$(echo $n | tr ' ' _).log" 2>&1 ) &
  ( python3 lab/s69/few.py --warm "$n" fp16 > "$OUT/warm16_$(echo $n | tr ' ' _).log" 2>&1 ) &
done
timeout 200 python3 -m pytest -q -rs tests/test_fp8_epilogue_gpu.py -k "torch_linear or out_dtype" > $OUT/fp8_torch.log 2>&1; echo "rc $?" >> $OUT/fp8_torch.log
wait
tail -2 $OUT/fp8_torch.log
cat $OUT/warm*.log | grep -v "^$" | head -40
timeout 250 python3 lab/s69/few.py > $OUT/few_bf16.log 2>&1; cat $OUT/few_bf16.log
timeout 200 python3 lab/s69/few.py fp16 > $OUT/few_fp16.log 2>&1; cat $OUT/few_fp16.log
