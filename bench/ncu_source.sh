# Per-instruction warp-stall samples of fused3_wg at n = 512 (wg128x32 unless a dict of overrides is given):
# which SASS instructions the warps wait at. Writes $OUT/ncu_source.csv and prints the 45 most sampled.
export PYTHONPATH=. CUMM_CACHE_DIR=/tmp/cumm-cache
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
CFG=${1:-"dict()"}
timeout 200 ncu --clock-control none -k regex:fused3_wg --launch-skip 3 --launch-count 1 \
  --section SourceCounters --section WarpStateStats -f -o $OUT/ncu_source python3 bench/ncu_launch.py "$CFG" > $OUT/ncu_source_run.log 2>&1; echo "ncu rc=$?"; tail -3 $OUT/ncu_source_run.log
ncu -i $OUT/ncu_source.ncu-rep --page source --csv --print-source sass > $OUT/ncu_source.csv 2> $OUT/ncu_source_err.log
echo "csv rc=$? lines=$(wc -l < $OUT/ncu_source.csv)"; head -c 600 $OUT/ncu_source_err.log
python3 - "$OUT/ncu_source.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
head_i = next(i for i, r in enumerate(rows) if any("Source" in c for c in r))
head = rows[head_i]
print("columns:", [c for c in head][:40])
src = next(i for i, c in enumerate(head) if c.strip() == "Source")
samp = [i for i, c in enumerate(head) if "Sampling" in c and "All" in c] or [i for i, c in enumerate(head) if "Sampling" in c]
print("sample columns:", [head[i] for i in samp])
k = samp[0]
def num(s):
    try: return float(s.replace(",", ""))
    except ValueError: return 0.0
body = [r for r in rows[head_i + 1:] if len(r) > k]
total = sum(num(r[k]) for r in body)
addr = next((i for i, c in enumerate(head) if c.strip() == "Address"), 0)
print(f"total samples {total:.0f}")
for r in sorted(body, key=lambda r: -num(r[k]))[:45]:
    extra = " ".join(f"{head[i][:18]}={r[i]}" for i in samp[1:3])
    print(f"{num(r[k]):7.0f} {100 * num(r[k]) / total:5.1f}%  {r[addr]}  {r[src][:90]}  {extra}")
PY
