#!/usr/bin/env bash
# session 6 probes: fused3_wg layouts and errors, its tests, host path, ncu at n = 512, chain table at 512
export PYTHONPATH=. PYTHONUNBUFFERED=1 CUPY_CACHE_DIR=/tmp/cupy-cache CUMM_CACHE_DIR=/tmp/cumm-cache
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
steps=${*:-wg tests host ncu chain}
for step in $steps; do
  echo "=== $step $(date +%T)"
  case $step in
    wg) timeout 200 python3 bench/probe_wg.py > $OUT/probe_wg.log 2>&1; echo "probe_wg rc=$?"; grep -E "layout|FAIL|worst" $OUT/probe_wg.log | head -20 ;;
    tests) timeout 300 python3 -m pytest -q -x tests/test_chain.py > $OUT/test_chain.log 2>&1; echo "rc=$?"; tail -3 $OUT/test_chain.log ;;
    host) timeout 100 python3 bench/probe_chain.py --n 512 --configs wg128x32 > $OUT/probe_chain.log 2>&1; echo "rc=$?"; head -20 $OUT/probe_chain.log; grep -A1 "^n=512 " $OUT/probe_chain.log ;;
    ncu) for k in ${NCU_KERNELS:-fused3_wg fused3_tc}; do
        timeout 120 ncu --clock-control none -k regex:$k --launch-skip 3 --launch-count 1 --section SpeedOfLight \
          --section WarpStateStats --section MemoryWorkloadAnalysis --section SchedulerStats --section Occupancy \
          python3 -c "
import cupy, cumm
n = ${NCU_N:-512}
x = [cupy.random.standard_normal((n, n), dtype=cupy.float32) for _ in range(3)]
e = cupy.empty((n, n), cupy.float32)
for _ in range(5): cumm.multi_dot(x, kernel='$k', out=e)
cupy.cuda.Device().synchronize()
" > $OUT/ncu_$k.log 2>&1; echo "ncu $k rc=$?"; grep -E "Duration|Throughput|Issue Slots|Active|Stall|Eligible|Warp Cycles|Hit Rate|Bandwidth|No Eligible|One or More" $OUT/ncu_$k.log | head -40; done ;;
    chain) timeout 300 python3 bench/chain.py --sizes ${CHAIN_SIZES:-512} --no-extra --repeat 50 ${CHAIN_ARGS:-} --json $OUT/chain.json > $OUT/chain.log 2>&1; echo "chain rc=$?"; tail -14 $OUT/chain.log ;;
  esac
done
