"""Probe: which SMs share a GPC (clusters of 8 / 4 / 2 blocks always do) and where blocks and clusters land.
One block per SM (big dynamic shared memory). PYTHONPATH=. python3 gpc.py"""
import collections, json, sys
import cupy as cp

SRC = r'''
extern "C" __global__ void __cluster_dims__(CL, 1, 1) probe(int* out) {
    extern __shared__ int s[];
    unsigned smid, rank;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    long long t0 = clock64();
    while (clock64() - t0 < 200000) {}  // stay resident so every block of the grid is placed at once
    if (threadIdx.x == 0) { out[2 * blockIdx.x] = smid; out[2 * blockIdx.x + 1] = rank; s[0] = smid; }
}
'''
SMEM = 200 * 1024
def kern(cl):
    m = cp.RawModule(code=SRC.replace("CL", str(cl)), options=("-arch=sm_90",))
    k = m.get_function("probe")
    k.max_dynamic_shared_size_bytes = SMEM
    return k

parent = {}
def find(x):
    parent.setdefault(x, x)
    while parent[x] != x:
        parent[x] = parent[parent[x]]
        x = parent[x]
    return x
def union(a, b):
    parent[find(a)] = find(b)

res = {}
for cl in (8, 4, 2, 1):
    k = kern(cl)
    for grid in sorted({cl * g for g in range(1, 132 // cl + 1)}, reverse=True)[:12]:
        out = cp.full(2 * grid, -1, dtype=cp.int32)
        try:
            k((grid,), (128,), (out,), shared_mem=SMEM)
            cp.cuda.Device().synchronize()
        except Exception as e:
            print("cl", cl, "grid", grid, "failed", str(e)[:100]); continue
        o = out.get().reshape(-1, 2)
        sms = [int(x) for x in o[:, 0]]
        if cl > 1:
            for c in range(grid // cl):
                for b in range(c * cl, c * cl + cl - 1):
                    union(sms[b], sms[b + 1])
        res[f"cl{cl}_grid{grid}"] = sms
gpcs = collections.defaultdict(list)
for s in range(132):
    gpcs[find(s)].append(s)
groups = sorted(gpcs.values(), key=lambda g: g[0])
print("GPC groups (from co-cluster unions):", len(groups))
for g in groups:
    print(len(g), g)
gid = {s: i for i, g in enumerate(groups) for s in g}
for key in ("cl1_grid132", "cl1_grid128", "cl2_grid128", "cl2_grid132"):
    if key in res:
        print(key, "block -> GPC:", [gid.get(s, -1) for s in res[key]])
json.dump({"groups": groups, "placements": res}, open(sys.argv[1] if len(sys.argv) > 1 else "gpc.json", "w"))
