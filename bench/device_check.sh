#!/usr/bin/env bash
# One device call: GPU facts, the test suite, compute-sanitizer, the sweep. Logs land in $OUT.
# Usage (device tool): bash bench/device_check.sh [tests|sanitize|sweep|bench ...]
set -uo pipefail
export PYTHONPATH=. PYTHONUNBUFFERED=1 CUPY_CACHE_DIR=/tmp/cupy-cache
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
steps=${*:-tests sanitize sweep}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
for step in $steps; do
  echo "=== $step"
  case $step in
    tests) python3 -m pytest -q -rs tests 2>&1 | tee "$OUT/pytest.log" | tail -40 ;;
    sanitize)
      compute-sanitizer --tool memcheck --leak-check no python3 bench/sanitize.py 2>&1 | tee "$OUT/memcheck.log" | tail -8
      compute-sanitizer --tool racecheck python3 bench/sanitize.py --shapes 127x131x137,4097x4095x33 2>&1 \
        | tee "$OUT/racecheck.log" | tail -8 ;;
    sweep) python3 bench/sweep.py --sizes "${SWEEP_SIZES:-4096}" --only "${SWEEP_ONLY:-}" 2>&1 | tee "$OUT/sweep.log" ;;
    bench) python3 -m cumm bench ${BENCH_ARGS:-} 2>&1 | tee "$OUT/bench.log" ;;
  esac
done
