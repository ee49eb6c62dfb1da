#!/usr/bin/env bash
# session 14 device steps, any of:
#   chaintest  every test of tests/test_chain.py
#   ab14       bench/ab_wg.py, two configurations of the working tree's template per case (CASES, default RF = 0
#              against RF = 1), back to back on L2-resident inputs and with rotating inputs, an event pair per call
#   abrep      bench/ab_wg.py against a saved copy of a template (OLD, default bench/_old/fused3_wg.cu, which the
#              tree does not keep: git show REV:cumm/kernels/fused3_wg.cu > it), REPS processes (default 4) both
#              ways, then twice the working tree's template against itself (the null spread: one process can
#              favour one side by ~0.3 us at n = 512, so a single A/B run does not settle a change that small)
#   ncu14      ncu: L2 bytes and throughput, bank conflicts, of one launch at n = 512 per NCU_CFGS entry
#   sanitize   compute-sanitizer memcheck and racecheck on bench/chain_sanitize.py (every named configuration)
#   pstest     the copy-engine tests of the PS = 1 configurations (needs bench/results/session14/presplit.patch)
# and every step of session13.sh, which it runs for other names.
. "$(dirname "$0")/session_env.sh"
cases=${CASES:-wg64x32rf0/wg64x32:768,wg64x32rf0/wg64x32:896,kw64x32/kw64x32rf1:512}
for step in "$@"; do
  case $step in
    chaintest)
      timeout ${TEST_S:-400} python3 -m pytest -q -x -rs tests/test_chain.py > $OUT/chaintest.log 2>&1
      echo "chaintest rc=$?"; tail -4 $OUT/chaintest.log ;;
    ab14)
      for mode in "" "--rotate --per-call"; do
        echo "== ab ${mode:-L2-resident batches}"
        timeout 240 python3 bench/ab_wg.py --cases $cases $mode
      done 2>&1 | tee $OUT/ab14.log | grep -v "^$" ;;
    abrep)
      c=${CASES:-kw64x32:512,kw64x32:384,wg64x32:768,wg64x32:896}
      cp cumm/kernels/fused3_wg.cu /tmp/same_fused3_wg.cu
      for i in $(seq ${REPS:-4}); do
        for mode in "" "--rotate --per-call"; do
          echo "== old ($OLD) vs new, rep $i ${mode:-L2}"
          timeout 100 python3 bench/ab_wg.py --old ${OLD:-bench/_old/fused3_wg.cu} --cases $c --batches 21 $mode
        done
      done 2>&1 | tee $OUT/abrep.log | grep -v "^$"
      for i in 1 2; do
        echo "== null: the working tree's template against itself, rep $i"
        timeout 100 python3 bench/ab_wg.py --old /tmp/same_fused3_wg.cu --cases $c --batches 21
      done 2>&1 | tee $OUT/abnull.log | grep -v "^$" ;;
    ncu14)
      m=gpu__time_duration.sum,lts__t_bytes.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed
      m=$m,lts__t_sectors_srcunit_tex_op_read.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed
      m=$m,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum
      for cfg in ${NCU_CFGS:-'dict(base="kw64x32")' 'dict(base="wg64x32")'}; do
        echo "=== $cfg"
        timeout 120 ncu --clock-control none -k regex:fused3_wg --launch-skip 3 --launch-count 1 --metrics "$m" \
          python3 bench/ncu_launch.py "$cfg" 2>&1 | grep -E "^\s+(sm__|gpu__|lts|l1tex)"
      done 2>&1 | tee $OUT/ncu14.log ;;
    sanitize)
      timeout 200 compute-sanitizer --tool memcheck python3 bench/chain_sanitize.py > $OUT/chain_memcheck.log 2>&1
      echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|worst|FAIL" $OUT/chain_memcheck.log | tail -3
      timeout 250 compute-sanitizer --tool racecheck python3 bench/chain_sanitize.py > $OUT/chain_racecheck.log 2>&1
      echo "racecheck rc=$?"; grep -E "RACECHECK SUMMARY|ERROR SUMMARY|worst|FAIL" $OUT/chain_racecheck.log | tail -3 ;;
    pstest)
      timeout ${TEST_S:-300} python3 -m pytest -q -x -rs tests/test_chain.py -k "tma and (PS1 or 37x45x40x300)" \
        > $OUT/pstest.log 2>&1
      echo "pstest rc=$?"; tail -4 $OUT/pstest.log ;;
    *)
      OUT=$OUT bash "$here/session13.sh" "$step" ;;
  esac
done
