#!/usr/bin/env bash
# session 11 device steps, any of: kwtest (fused3_wg's GPU tests, K groups included), ab11
# (bench/ab_wg.py, configuration against configuration: CASES), probe11 (bench/probe_chain.py phases), probewg11
# (bench/probe_wg.py sections: CONFIGS, VARIANTS), suite11 (every test), table11 (bench/chain.py, probe_chain), chain11
# (bench/chain.py with session 11's configurations, rotating inputs), and every step of session10.sh, which it
# runs for other names.
. "$(dirname "$0")/session_env.sh"
for step in "$@"; do
  case $step in
    kwtest)
      timeout ${TEST_S:-420} python3 -m pytest -q -x -rs tests/test_chain.py \
        -k "wg or tma or back_to_back or cp_async" > $OUT/kwtest.log 2>&1; echo "kwtest rc=$?"; tail -6 $OUT/kwtest.log ;;
    ab11)
      timeout ${AB_S:-240} python3 bench/ab_wg.py --cases ${CASES:-wg64x32/kw64x32:512,wg64x32/kw64x32k32:512,wg64x32/kw64x32:384,wg64x32/kw64x32:640} \
        > $OUT/ab11.log 2>&1; echo "ab11 rc=$?"; grep -v Warn $OUT/ab11.log ;;
    probe11)
      timeout 200 python3 bench/probe_chain.py --n 512 --configs ${CONFIGS:-wg64x32,kw64x32} --no-host \
        > $OUT/probe11.log 2>&1; echo "probe11 rc=$?"; cat $OUT/probe11.log ;;
    probewg11)
      timeout 200 python3 bench/probe_wg.py --n ${N:-512} --configs ${CONFIGS:-wg64x32,kw64x32} \
        --variants ${VARIANTS:-full,nomma,skeleton} --clusters 0 > $OUT/probewg11.log 2>&1; echo "probewg11 rc=$?"
      grep "^n=" $OUT/probewg11.log ;;
    chain11)
      timeout ${CHAIN_S:-420} python3 bench/chain.py --sizes ${SIZES:-384,512,640,1024} --no-extra --configs \
        --only fused3_wg:s11 --repeat 100 --json $OUT/chain11.json > $OUT/chain11.log 2>&1; echo "chain11 rc=$?"
      cat $OUT/chain11.log ;;
    suite11)
      timeout ${SUITE_S:-560} python3 -m pytest -q -rs tests bench > $OUT/pytest.log 2>&1; echo "pytest rc=$?"
      tail -4 $OUT/pytest.log ;;
    table11)  # the chain table (every size, the non-square chain) and the phases of the n = 512 configurations
      timeout 420 python3 bench/chain.py --json $OUT/h200_chain.json > $OUT/h200_chain.log 2>&1; echo "chain rc=$?"
      sed -n '/NVIDIA/,$p' $OUT/h200_chain.log
      timeout 120 python3 bench/probe_chain.py --n 512 --configs kw64x32,wg64x32,tc32x32 > $OUT/probe_chain.log 2>&1
      echo "probe rc=$?"; head -16 $OUT/probe_chain.log; grep -A1 "^n=512 " $OUT/probe_chain.log ;;
    abbar)  # the grid barrier's early exit against HEAD's (ab_old/: fused3_wg.cu and grid_barrier.cuh; carry it)
      timeout 240 python3 bench/ab_wg.py --old ab_old --cases ${CASES:-kw64x32:512,kw64x32:384,wg64x32:768,wg128x64:1024} \
        > $OUT/abbar.log 2>&1; echo "abbar rc=$?"; grep -v Warn $OUT/abbar.log ;;
    *)
      OUT=$OUT bash "$here/session10.sh" "$step" ;;
  esac
done
