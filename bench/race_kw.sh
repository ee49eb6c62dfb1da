#!/usr/bin/env bash
# Racecheck experiments of session 11 (bench/NOTES.md): fused3_wg's K groups on the cp.async path
# (bench/race_kw.py; `kw`), and a minimal kernel with named barriers (bench/race_named_barrier.py; `nb`).
export PYTHONPATH=.:bench CUPY_CACHE_DIR=/tmp/cupy-cache CUMM_CACHE_DIR=/tmp/cumm-cache
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
r() { timeout 150 compute-sanitizer --tool racecheck python3 bench/race_kw.py "$1" --variant $2 > $OUT/race_$3.log 2>&1; echo "$3 rc=$? $(grep -c 'Race reported' $OUT/race_$3.log) reports; $(grep 'RACECHECK SUMMARY' $OUT/race_$3.log)"; grep err $OUT/race_$3.log | tr '\n' ' '; echo; }
if [ "${1:-kw}" = kw ]; then
  r "dict(BM=64, BN=32, BK=32, CL=1, STAGES=4, XA=0, TMA=0, KW=2)" plain kw2cl1
  r "dict(BM=64, BN=32, BK=32, CL=1, STAGES=4, XA=0, TMA=0, KW=1)" plain kw1cl1
  r "dict(BM=64, BN=32, BK=32, CL=2, STAGES=4, XA=0, TMA=0, KW=2)" plain kw2cl2
  r "dict(BM=64, BN=32, BK=32, CL=1, STAGES=4, XA=0, TMA=0, KW=2)" immid kw2imm
else
  for mode in 0 1 2 3 4 5 6; do
    timeout 60 compute-sanitizer --tool racecheck python3 bench/race_named_barrier.py $mode > $OUT/race_nb$mode.log 2>&1
    echo "nb$mode rc=$? $(grep 'mode' $OUT/race_nb$mode.log) $(grep 'RACECHECK SUMMARY' $OUT/race_nb$mode.log)"
  done
fi
