#!/usr/bin/env bash
# session 9 device steps, any of: tma (the copy-engine tests and an A/B sweep), and every step of session8.sh
# (quick pdl host) and session7.sh (wgtest phases sweep suite chain sanitize), which it runs for other names.
. "$(dirname "$0")/session_env.sh"
TMA_ONLY=${TMA_ONLY:-fused3_wg:128x32c2k32s8xa,fused3_wg:128x32c2k32s8xa-tma,fused3_wg:128x32c2k32s4xa-tma,fused3_wg:128x32c2k32s8-tma,fused3_wg:64x64c2k32s3,fused3_wg:64x64c2k32s3-tma,fused3_wg:64x64c2k32s4xa-tma,fused3_wg:128x64c2k32s5,fused3_wg:128x64c2k32s6,fused3_wg:128x64c2k32s5-tma,fused3_wg:128x32c4k32s4xa-tma}
for step in "$@"; do
  case $step in
    tmatest)
      timeout 280 python3 -m pytest -q -x -rs tests/test_chain.py -k "tma or back_to_back or wg_configs" \
        > $OUT/tmatest.log 2>&1; echo "tmatest rc=$?"; tail -6 $OUT/tmatest.log ;;
    tmasweep)
      timeout ${SWEEP_S:-300} python3 bench/chain.py --sizes ${SIZES:-384,512,768,1024} --no-extra --repeat ${REPEAT:-60} \
        --configs --only $TMA_ONLY --json $OUT/tma_sweep.json > $OUT/tma_sweep.log 2>&1
      echo "tmasweep rc=$?"; sed -n '/NVIDIA/,$p' $OUT/tma_sweep.log | grep -v "^$" | tail -8 ;;
    host9)  # host cost of the tensor maps; phase times with and without the copy engine
      timeout 120 python3 bench/probe_tma_host.py > $OUT/tma_host.log 2>&1; echo "tma_host rc=$?"; cat $OUT/tma_host.log
      timeout 150 python3 bench/probe_chain.py --n 512,1024 --no-host --configs wg128x32,wg128x32tma,wg128x64,wg128x64s5tma \
        > $OUT/tma_phases.log 2>&1; echo "phases rc=$?"; grep -A1 "^n=" $OUT/tma_phases.log ;;
    *)
      OUT=$OUT bash "$here/session8.sh" "$step" ;;
  esac
done
