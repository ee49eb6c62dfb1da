#!/usr/bin/env bash
# session 10 device steps, any of: wgtest10 (fused3_wg's tests), ab (bench/ab_wg.py against OLD, a copy of the
# template before the change), probe10 (bench/probe_wg.py), and every step of session9.sh, which it runs for
# other names.
. "$(dirname "$0")/session_env.sh"
for step in "$@"; do
  case $step in
    wgtest10)
      timeout ${TEST_S:-300} python3 -m pytest -q -x -rs tests/test_chain.py -k "wg or tma or back_to_back" \
        > $OUT/wgtest10.log 2>&1; echo "wgtest10 rc=$?"; tail -6 $OUT/wgtest10.log ;;
    ab)
      timeout ${AB_S:-240} python3 bench/ab_wg.py --old ${OLD:-ab_old/fused3_wg.cu} ${CASES:+--cases $CASES} \
        > $OUT/ab.log 2>&1; echo "ab rc=$?"; cat $OUT/ab.log | grep -v Warn ;;
    probe10)
      timeout 200 python3 bench/probe_wg.py --n 512 --configs wg128x32 --variants ${VARIANTS:-full,nomma,skeleton} \
        --clusters 0 > $OUT/probe10.log 2>&1; echo "probe10 rc=$?"; grep "^n=" $OUT/probe10.log ;;
    *)
      OUT=$OUT bash "$here/session9.sh" "$step" ;;
  esac
done
