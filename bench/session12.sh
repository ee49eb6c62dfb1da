#!/usr/bin/env bash
# session 12 device steps, any of: fasttest (the chain tests of multi_dot's fast path, errors, views, back to
# back), host12 (bench/probe_chain.py at n = 512: the host path step by step, checked and fast, and the phases
# of CONFIGS), suite12 (every test), chain12 (bench/chain.py at SIZES, every column, the non-square chain unless NOEXTRA=1), and every
# step of session11.sh, which it runs for other names.
. "$(dirname "$0")/session_env.sh"
for step in "$@"; do
  case $step in
    fasttest)
      timeout ${TEST_S:-300} python3 -m pytest -q -x -rs tests/test_chain.py \
        -k "fast_path or back_to_back or device_errors or unaligned or square or two_arrays or empty" \
        > $OUT/fasttest.log 2>&1; echo "fasttest rc=$?"; tail -6 $OUT/fasttest.log ;;
    host12)
      timeout 200 python3 bench/probe_chain.py --n 512 --configs ${CONFIGS:-kw64x32} > $OUT/host12.log 2>&1
      echo "host12 rc=$?"; grep -v "^ *[0-9]* *0.000" $OUT/host12.log | head -40 ;;
    chain12)
      timeout ${CHAIN_S:-420} python3 bench/chain.py --sizes ${SIZES:-512} ${NOEXTRA:+--no-extra} --repeat 100 \
        --json $OUT/chain12.json > $OUT/chain12.log 2>&1; echo "chain12 rc=$?"; sed -n '/NVIDIA/,$p' $OUT/chain12.log ;;
    suite12)
      timeout ${SUITE_S:-560} python3 -m pytest -q -rs tests bench > $OUT/pytest.log 2>&1; echo "pytest rc=$?"
      tail -4 $OUT/pytest.log ;;
    *)
      OUT=$OUT bash "$here/session11.sh" "$step" ;;
  esac
done
