#!/usr/bin/env bash
# session 15 device steps, any of:
#   pctest   the copy-engine tests of tests/test_chain.py for the PC = 1 configurations and kw64x32 with PC = 0
#   abpc     bench/ab_wg.py, two configurations of the working tree's template per case (CASES, default
#            kw64x32 with PC = 0 against PC = 1 at n = 256 .. 512), REPS processes (default 2), L2-resident batches
#            and rotating inputs with an event pair per call
#   abold    bench/ab_wg.py against a saved copy of the kernels folder (OLD, default bench/_old, which the tree
#            does not keep: git archive REV cumm/kernels | tar -x -C bench/_old --strip-components=2), REPS
#            processes, CASES default the named configurations as the working tree has them
#   phases15 bench/probe_chain.py's phase stamps at n = 512 (CONFIGS, default kw64x32pc0,kw64x32pc)
#   variants each folder of VARIANTS (default bench/_v/*: copies of cumm/kernels files the tree does not keep, each
#            replacing the package's file of that name) against the working tree: phase stamps of VCONFIG (default
#            kw64x32pc), then ab_wg with VCASES (default kw64x32pc at 512 and 384) in REPS processes, L2-resident
#            and rotating inputs with an event pair per call (session 15's runs 2 and 5 ran it as VARIANTS_RUN=1)
# and every step of session14.sh, which it runs for other names.
. "$(dirname "$0")/session_env.sh"
for step in "$@"; do
  case $step in
    pctest)  # (its log is wgtest.log; session 15's runs 1 and 2 called it pctest.log)
      WGTEST_K="tma and (PC1 or PC0)" OUT=$OUT bash "$here/session13.sh" wgtest ;;
    abpc)
      c=${CASES:-kw64x32pc0/kw64x32pc:512,kw64x32pc0/kw64x32pc:448,kw64x32pc0/kw64x32pc:384,kw64x32pc0/kw64x32pc:256}
      for i in $(seq ${REPS:-2}); do
        for mode in "" "--rotate --per-call"; do
          echo "== each case's first configuration (old) against its second (new), rep $i ${mode:-L2}"
          timeout 100 python3 bench/ab_wg.py --cases $c --batches 21 $mode
        done
      done 2>&1 | tee $OUT/abpc.log | grep -v "^$" ;;
    abold)
      c=${CASES:-kw64x32:512,kw64x32:384,wg64x32:768,wg128x64:1024}
      for i in $(seq ${REPS:-2}); do
        for mode in "" "--rotate --per-call"; do
          echo "== old (${OLD:-bench/_old}) vs new, rep $i ${mode:-L2}"
          timeout 100 python3 bench/ab_wg.py --old ${OLD:-bench/_old} --cases $c --batches 21 $mode
        done
      done 2>&1 | tee $OUT/abold.log | grep -v "^$" ;;
    phases15)
      timeout 120 python3 bench/probe_chain.py --n 512 --configs ${CONFIGS:-kw64x32pc0,kw64x32pc} --no-host \
        > $OUT/phases15.log 2>&1
      echo "phases15 rc=$?"; cat $OUT/phases15.log ;;
    variants)
      for v in ${VARIANTS:-bench/_v/*}; do
        timeout 120 python3 bench/probe_chain.py --n 512 --configs ${VCONFIG:-kw64x32pc} --no-host --template $v \
          2>&1 | sed "s|^n=|$v: n=|"
      done | tee $OUT/vphases.log
      timeout 120 python3 bench/probe_chain.py --n 512 --configs ${VCONFIG:-kw64x32pc} --no-host \
        | sed "s|^n=|tree: n=|" | tee -a $OUT/vphases.log
      for v in ${VARIANTS:-bench/_v/*}; do
        for i in $(seq ${REPS:-2}); do
          for mode in "" "--rotate --per-call"; do
            echo "== $v (old) vs the tree (new), rep $i ${mode:-L2}"
            timeout 100 python3 bench/ab_wg.py --old $v --cases ${VCASES:-kw64x32pc:512,kw64x32pc:384} \
              --batches 21 $mode
          done
        done
      done 2>&1 | tee $OUT/vab.log | grep -v "^$" ;;
    *)
      OUT=$OUT bash "$here/session14.sh" "$step" ;;
  esac
done
