#!/usr/bin/env bash
# The full H200 check in one call: test suite, compute-sanitizer, the ladder table (JSON, markdown, plot,
# host overhead), the chain table. Each step's log lands in $OUT; the table prints last.
set -uo pipefail
export PYTHONPATH=. PYTHONUNBUFFERED=1 CUPY_CACHE_DIR=/tmp/cupy-cache
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
steps=${*:-tests sanitize bench chain}
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv
  python3 -c "import cupy; print('cupy', cupy.__version__, 'cuda runtime', cupy.cuda.runtime.runtimeGetVersion())"
} > "$OUT/env.txt" 2>&1
python3 - >> "$OUT/env.txt" 2>&1 <<'PY'
import cupy, cumm
from cupy.cuda import nvrtc
print("nvrtc", nvrtc.getVersion())
r = cumm.compile("naive", arch="sm_90")
print("offline compile:", r.registers, "registers;", repr(r.log[:400]))
PY
for step in $steps; do
  echo "=== $step $(date +%T)"
  case $step in
    tests) python3 -m pytest -q -rs tests bench > "$OUT/pytest.log" 2>&1; echo "pytest rc=$?"; tail -3 "$OUT/pytest.log" ;;
    sanitize)
      { compute-sanitizer --tool memcheck --leak-check no python3 bench/sanitize.py
        echo "--- racecheck"
        compute-sanitizer --tool racecheck python3 bench/sanitize.py
        echo "--- chain memcheck"
        [ -f bench/chain_sanitize.py ] && compute-sanitizer --tool memcheck python3 bench/chain_sanitize.py
      } > "$OUT/sanitizer.log" 2>&1
      grep -E "ERROR SUMMARY|RACECHECK SUMMARY|worst|FAILED" "$OUT/sanitizer.log" ;;
    bench)
      python3 -m cumm bench --sizes ${BENCH_SIZES:-256,512,1024,2048,4096,8192} \
        --shapes 4095x4095x4095,4097x4097x4097 --overhead \
        --json "$OUT/h200.json" --markdown "$OUT/h200.md" --plot "$OUT/h200.png" > "$OUT/bench.log" 2>&1
      echo "bench rc=$?"; cat "$OUT/bench.log" | tail -80 ;;
    auto)
      python3 -m cumm bench --kernels auto,tf32x3,warptile --sizes 1024,2048,4096,8192 \
        --shapes 8192x8192x256,256x8192x8192,8192x256x8192,64x64x4096,4095x4095x4095 --json "$OUT/h200_auto.json" \
        --markdown "$OUT/h200_auto.md" > "$OUT/auto.log" 2>&1
      echo "auto rc=$?"; cat "$OUT/auto.log" | tail -40 ;;
    chain) python3 bench/chain.py --json "$OUT/chain.json" > "$OUT/chain.log" 2>&1; echo "chain rc=$?"; cat "$OUT/chain.log" ;;
  esac
done
