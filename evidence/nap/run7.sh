#!/bin/bash
cd "$(dirname "$0")/../.."
export CUMM_CACHE_DIR=/tmp/cumm_cache
T0=$(date +%s)
for n in plain silu gelu_tanh bias+gelu_tanh; do
  PYTHONPATH=. python3 lab/s67/pp.py base --warm "$n" > /dev/null 2>>$OUT/warm.err &
  PYTHONPATH=lab/s67/nap1 python3 lab/s67/pp.py nap1 --warm "$n" > /dev/null 2>>$OUT/warm.err &
  PYTHONPATH=lab/s67/nap4 python3 lab/s67/pp.py nap4 --warm "$n" > /dev/null 2>>$OUT/warm.err &
done
wait
echo "warm $(( $(date +%s) - T0 )) s"; tail -3 $OUT/warm.err
for r in 1 2 3; do
  PYTHONPATH=. python3 lab/s67/pp.py base 2>&1
  PYTHONPATH=lab/s67/nap1 python3 lab/s67/pp.py nap1 2>&1
  PYTHONPATH=lab/s67/nap4 python3 lab/s67/pp.py nap4 2>&1
done
echo "done $(( $(date +%s) - T0 )) s"
