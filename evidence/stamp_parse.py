import sys, statistics
lines = open(sys.argv[1]).read().splitlines()
i0 = lines.index("CALLS START"); i1 = lines.index("CALLS END")
st = [tuple(map(int, l.split()[1:])) for l in lines[i0 + 1:i1] if l.startswith("STAMP")]
nb = max(s[0] for s in st) + 1
calls = [st[i:i + nb] for i in range(0, len(st), nb)]
rows = []
for c in calls:
    t0 = min(s[1] for s in c)
    rows.append(dict(span=(max(s[4] for s in c) - t0) / 1e3,
                     start_spread=(max(s[1] for s in c) - t0) / 1e3,
                     ph1_mean=statistics.mean(s[2] - s[1] for s in c) / 1e3,
                     ph1_last=(max(s[2] for s in c) - t0) / 1e3,
                     release=(min(s[3] for s in c) - max(s[2] for s in c)) / 1e3,
                     ph2_from_release=(max(s[4] for s in c) - min(s[3] for s in c)) / 1e3,
                     ph2_mean=statistics.mean(s[4] - s[3] for s in c) / 1e3))
print(f"{len(calls)} calls of {nb} blocks; medians in us (globaltimer):")
for k in rows[0]:
    print(f"  {k:18s} {statistics.median(r[k] for r in rows):.2f}")
