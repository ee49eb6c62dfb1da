#!/usr/bin/env bash
# session 6 final checks, in two device calls: `tests` (suite + sanitizer on the chain kernels) and `chain`
export PYTHONPATH=. PYTHONUNBUFFERED=1 CUPY_CACHE_DIR=/tmp/cupy-cache CUMM_CACHE_DIR=/tmp/cumm-cache
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
case $1 in
  tests)
    timeout 330 python3 -m pytest -q -rs tests bench > $OUT/pytest.log 2>&1; echo "pytest rc=$?"; tail -4 $OUT/pytest.log
    timeout 120 compute-sanitizer --tool memcheck python3 bench/chain_sanitize.py > $OUT/chain_memcheck.log 2>&1
    echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|worst|FAIL" $OUT/chain_memcheck.log | tail -3
    timeout 120 compute-sanitizer --tool racecheck python3 bench/chain_sanitize.py > $OUT/chain_racecheck.log 2>&1
    echo "racecheck rc=$?"; grep -E "RACECHECK SUMMARY|ERROR SUMMARY|worst|FAIL" $OUT/chain_racecheck.log | tail -3 ;;
  chain)
    timeout 400 python3 bench/chain.py --json $OUT/h200_chain.json > $OUT/h200_chain.log 2>&1; echo "chain rc=$?"
    sed -n '/NVIDIA/,$p' $OUT/h200_chain.log
    timeout 60 python3 bench/probe_chain.py --n 512 --configs tc32x32 > $OUT/probe_chain.log 2>&1; echo "probe rc=$?"
    head -16 $OUT/probe_chain.log; grep -A1 "^n=512 " $OUT/probe_chain.log ;;
esac
