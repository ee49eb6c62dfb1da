#!/usr/bin/env bash
# session 7 device steps, any of: wgtest phases sweep suite chain sanitize (env: N, CONFIGS, SIZES, ONLY)
export PYTHONPATH=. PYTHONUNBUFFERED=1 CUPY_CACHE_DIR=/tmp/cupy-cache CUMM_CACHE_DIR=/tmp/cumm-cache
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
for step in "$@"; do
  case $step in
    wgtest)
      timeout 200 python3 -m pytest -q -x -rs tests/test_chain.py -k "wg" > $OUT/wgtest.log 2>&1; echo "wgtest rc=$?"
      tail -15 $OUT/wgtest.log ;;
    phases)
      timeout 120 python3 bench/probe_chain.py --n ${N:-512} --no-host --configs ${CONFIGS:-wg128x32,wg128x64,tc32x32} \
        > $OUT/phases.log 2>&1; echo "phases rc=$?"; tail -12 $OUT/phases.log ;;
    sweep)
      timeout 300 python3 bench/chain.py --sizes ${SIZES:-256,512,1024} --no-extra --configs --only ${ONLY:-fused3_wg:,fused3_tc:32x32} --json $OUT/sweep.json \
        > $OUT/sweep.log 2>&1; echo "sweep rc=$?"; sed -n '/NVIDIA/,$p' $OUT/sweep.log ;;
    suite)
      timeout 330 python3 -m pytest -q -rs tests bench > $OUT/pytest.log 2>&1; echo "pytest rc=$?"; tail -4 $OUT/pytest.log ;;
    chain)
      timeout 300 python3 bench/chain.py --json $OUT/h200_chain.json > $OUT/h200_chain.log 2>&1; echo "chain rc=$?"
      sed -n '/NVIDIA/,$p' $OUT/h200_chain.log
      timeout 90 python3 bench/probe_chain.py --n 512 --configs wg64x32,wg128x32,tc32x32 > $OUT/probe_chain.log 2>&1
      echo "probe rc=$?"; head -16 $OUT/probe_chain.log; grep -A1 "^n=512 " $OUT/probe_chain.log ;;
    sanitize)
      timeout 150 compute-sanitizer --tool memcheck python3 bench/chain_sanitize.py > $OUT/chain_memcheck.log 2>&1
      echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|worst|FAIL" $OUT/chain_memcheck.log | tail -3
      timeout 200 compute-sanitizer --tool racecheck python3 bench/chain_sanitize.py > $OUT/chain_racecheck.log 2>&1
      echo "racecheck rc=$?"; grep -E "RACECHECK SUMMARY|ERROR SUMMARY|worst|FAIL" $OUT/chain_racecheck.log | tail -3 ;;
  esac
done
