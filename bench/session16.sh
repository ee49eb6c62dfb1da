#!/usr/bin/env bash
# session 16 device steps, any of:
#   abmn     bench/ab_wg.py, pairs of configurations of the working tree's template (CASES, default MN = 0
#            against MN = 1 for wg128x64 at 640 .. 2048 and for kw64x32 at 512, then wg64x32 against wg128x64
#            at 768 and 896, where WG_RULE picks wg64x32), REPS processes (default 2), L2-resident batches and
#            rotating inputs with an event pair per call
# and every step of session15.sh (pctest, abpc, abold, phases15, variants) and of the sessions before it, which
# it runs for other names.
. "$(dirname "$0")/session_env.sh"
for step in "$@"; do
  case $step in
    abmn)  # (session15.sh's abpc with these cases; its log is abpc.log, run6's was abmn.log)
      CASES=${CASES:-wg128x64mn0/wg128x64:640,wg128x64mn0/wg128x64:1024,wg128x64mn0/wg128x64:2048,kw64x32/kw64x32mn:512,wg64x32/wg128x64:768,wg64x32/wg128x64:896} \
        OUT=$OUT bash "$here/session15.sh" abpc ;;
    *)
      OUT=$OUT bash "$here/session15.sh" "$step" ;;
  esac
done
