"""Does a warpgroup go on with other work while its wgmma run? Issue NI wgmma (m64nNk8, TF32) with A from
registers (RS, as fused3_wg does) or from shared memory (SS), then WORK independent instructions (FFMA chains,
or shared-memory loads and stores like a chunk's preparation), then wait; %clock64 stamps after the issue,
after the work and after the wait, averaged over R rounds and every warp. If the issue returns at once and the
work overlaps the tensor cores, issue + work + wait ~ max(wgmma, work); if the issue blocks until the tensor
cores take the instructions, the three add up.

    PYTHONPATH=. python3 bench/probe_hgmma.py
"""

from __future__ import annotations

import itertools

import cupy
import numpy as np
from cupy.cuda import function, nvrtc

from cumm._compile import _cubin

SOURCE = r"""
template <int R>
__device__ __forceinline__ unsigned long long desc(const float* p) {
    const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(p));
    return (unsigned long long)((a & 0x3ffff) >> 4) | ((unsigned long long)(16 * R >> 4) << 16) |
           ((unsigned long long)(128 >> 4) << 32);
}
#define F4(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
#define F16(i) F4(i), F4(i + 4), F4(i + 8), F4(i + 12)
__device__ __forceinline__ void mma_rs(float (&d)[16], const unsigned (&a)[4], unsigned long long b) {
    asm volatile("wgmma.mma_async.sync.aligned.m64n32k8.f32.tf32.tf32 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,"
                 "%12,%13,%14,%15}, {%16,%17,%18,%19}, %20, 1, 1, 1;\n"
                 : F16(0) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}
__device__ __forceinline__ void mma_ss(float (&d)[16], unsigned long long a, unsigned long long b) {
    asm volatile("wgmma.mma_async.sync.aligned.m64n32k8.f32.tf32.tf32 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,"
                 "%12,%13,%14,%15}, %16, %17, 1, 1, 1;\n"
                 : F16(0) : "l"(a), "l"(b));
}
__device__ __forceinline__ long long clk() {
    long long t; asm volatile("mov.u64 %0, %%clock64;" : "=l"(t) :: "memory"); return t;
}
// out[warp][0..2]: issue, work, wait clocks summed over R rounds; out[warp][3]: a value, so nothing is dropped
extern "C" __global__ void __launch_bounds__(NWG * 128) probe(long long* out, float seed) {
    __shared__ __align__(128) float sa[NWG][64 * 8];
    __shared__ __align__(128) float sb[32 * 8];
    __shared__ __align__(16) float4 scratch[NWG * 128 * 4];
    const int tid = threadIdx.x, grp = tid / 128;
    for (int i = tid; i < NWG * 64 * 8; i += NWG * 128) sa[i / 512][i % 512] = seed;
    for (int i = tid; i < 32 * 8; i += NWG * 128) sb[i] = seed;
    for (int i = tid; i < NWG * 128 * 4; i += NWG * 128) scratch[i] = make_float4(seed, seed, seed, seed);
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
    const unsigned long long da = desc<64>(sa[grp]), db = desc<32>(sb);
    unsigned a[4];
    for (int i = 0; i < 4; ++i) a[i] = __float_as_uint(seed * (i + 1));
    float d[16];
    for (int i = 0; i < 16; ++i) d[i] = 0.0f;
    float w[8];
    for (int i = 0; i < 8; ++i) w[i] = seed + i;
    long long ti = 0, tw = 0, tt = 0;
    for (int r = 0; r < ROUNDS; ++r) {
        const long long t0 = clk();
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
        for (int i = 0; i < NI; ++i) {
            if (SS) mma_ss(d, da, db); else mma_rs(d, a, db);
        }
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        const long long t1 = clk();
#pragma unroll
        for (int q = 0; q < 8; ++q) asm volatile("" : "+f"(w[q]) :: "memory");  // the work starts after t1
        if (KIND == 0) {  // independent FFMA chains
#pragma unroll
            for (int i = 0; i < WORK / 8; ++i)
#pragma unroll
                for (int q = 0; q < 8; ++q) w[q] = fmaf(w[q], 0.999f, 0.001f);
        } else {  // shared-memory loads, a split-like op, stores (like Y's split)
#pragma unroll 4
            for (int i = 0; i < WORK / 8; ++i) {
                float4* p = &scratch[(tid + 64 * i) % (NWG * 128 * 4)];
                float4 v = *p;
                v.x = v.x * 0.5f + w[0]; v.y = v.y * 0.5f + w[1]; v.z = v.z * 0.5f + w[2]; v.w = v.w * 0.5f + w[3];
                *p = v;
            }
        }
#pragma unroll
        for (int q = 0; q < 8; ++q) asm volatile("" : "+f"(w[q]) :: "memory");  // and ends before t2
        const long long t2 = clk();
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#pragma unroll
        for (int i = 0; i < 16; ++i) asm volatile("" : "+f"(d[i]) :: "memory");
        w[0] += d[0];
        const long long t3 = clk();
        ti += t1 - t0; tw += t2 - t1; tt += t3 - t2;
    }
    if (tid % 32 == 0) {
        const int wid = blockIdx.x * NWG * 4 + tid / 32;
        out[4 * wid] = ti; out[4 * wid + 1] = tw; out[4 * wid + 2] = tt;
        float s = 0; for (int q = 0; q < 8; ++q) s += w[q];
        out[4 * wid + 3] = (long long)s;
    }
}
"""


def build(nwg: int, ss: int, ni: int, work: int, kind: int, rounds: int):
    head = f"#define NWG {nwg}\n#define SS {ss}\n#define NI {ni}\n#define WORK {work}\n#define KIND {kind}\n" \
           f"#define ROUNDS {rounds}\n"
    prog = nvrtc.createProgram(head + SOURCE, "probe.cu", [], [])
    try:
        nvrtc.compileProgram(prog, ["-arch=sm_90a", "-std=c++17", "-ftz=true"])
    except nvrtc.NVRTCError as e:
        raise RuntimeError(nvrtc.getProgramLog(prog)) from e
    cubin = _cubin(nvrtc, prog)
    module = function.Module()
    module.load(cubin)
    return module, module.get_function("probe")


def main() -> None:
    rounds = 200
    print(f"{'wg':>2} {'A':>2} {'NI':>3} {'kind':>4} {'work':>5} | {'issue':>7} {'work':>7} {'wait':>7} "
          f"{'total':>7}  (clocks per round, mean over warps; grid 132)")
    for nwg, ni, kind, work in itertools.product((1, 2), (12, 24), (0, 1), (0, 64, 256, 1024)):
        for ss in (0, 1):
            module, fn = build(nwg, ss, ni, work, kind, rounds)
            out = cupy.zeros((132 * nwg * 4, 4), dtype=cupy.int64)
            for _ in range(2):
                fn((132,), (nwg * 128,), (out, np.float32(1.0)))
            cupy.cuda.Device().synchronize()
            t = out[:, :3].get().astype(np.float64).mean(axis=0) / rounds
            print(f"{nwg:>2} {'SS' if ss else 'RS':>2} {ni:>3} {('fma', 'smem')[kind]:>4} {work:>5} | "
                  f"{t[0]:7.0f} {t[1]:7.0f} {t[2]:7.0f} {t.sum():7.0f}", flush=True)


if __name__ == "__main__":
    main()
