#!/usr/bin/env bash
# session 8 device steps, any of: quick pdl host, and every step of session7.sh (wgtest phases sweep suite chain
# sanitize), which this script runs for the names it does not know.
. "$(dirname "$0")/session_env.sh"
for step in "$@"; do
  case $step in
    quick)  # the chain tests that launch persistent kernels back to back, and every fused3_wg / fused3_tc test
      timeout 240 python3 -m pytest -q -x -rs tests/test_chain.py -k "back_to_back or wg or tc or square" \
        > $OUT/quick.log 2>&1; echo "quick rc=$?"; tail -4 $OUT/quick.log ;;
    pdl)
      timeout 120 python3 bench/probe_pdl.py > $OUT/pdl.log 2>&1; echo "pdl rc=$?"; cat $OUT/pdl.log ;;
    host)
      timeout 120 python3 bench/probe_chain.py --n 512 --configs wg128x32,tc32x32 > $OUT/probe_chain.log 2>&1
      echo "probe rc=$?"; head -16 $OUT/probe_chain.log; grep -A1 "^n=512 " $OUT/probe_chain.log ;;
    *)
      OUT=$OUT bash "$here/session7.sh" "$step" ;;
  esac
done
