#!/usr/bin/env bash
# session 13 device steps, any of: wgtest (the fused3_wg tests: configurations, copy engine, K groups, back to back,
# fast path; WGTEST_K replaces that pytest -k expression), ab13 (bench/ab_wg.py, the working tree's template against
# a saved copy, OLD, default bench/_old/fused3_wg.cu, which the tree does not keep: git show
# REV:cumm/kernels/fused3_wg.cu > it; CASES; back to back on L2-resident inputs, and with rotating inputs and an
# event pair per call), phases13 (bench/probe_chain.py's phases at n = 512, no host part), and every step of
# session12.sh, which it runs for other names.
. "$(dirname "$0")/session_env.sh"
cases=${CASES:-kw64x32:512,kw64x32:384,kw64x32:448,kw64x32:256}
for step in "$@"; do
  case $step in
    wgtest)
      timeout ${TEST_S:-400} python3 -m pytest -q -x -rs tests/test_chain.py \
        -k "${WGTEST_K:-tma or back_to_back or fast_path or wg_configs}" > $OUT/wgtest.log 2>&1
      echo "wgtest rc=$?"; tail -4 $OUT/wgtest.log ;;
    ab13)
      for mode in "" "--rotate --per-call" "--rotate"; do
        echo "== ab ${mode:-L2-resident batches}"
        timeout 200 python3 bench/ab_wg.py --old ${OLD:-bench/_old/fused3_wg.cu} --cases $cases $mode
      done 2>&1 | tee $OUT/ab13.log | grep -v "^$" ;;
    phases13)
      timeout 120 python3 bench/probe_chain.py --n 512 --configs ${CONFIGS:-kw64x32} --no-host > $OUT/phases13.log 2>&1
      echo "phases13 rc=$?"; cat $OUT/phases13.log ;;
    *)
      OUT=$OUT bash "$here/session12.sh" "$step" ;;
  esac
done
