// sm90_fp8.cuh: wgmma with FP8 operands (e4m3 / e5m2, fp8.cuh's CUMM_FP8_A / CUMM_FP8_B), rendered after sm90.cuh.
// m64nNk32: d (64 x N FP32, N / 2 registers a thread, the same layout as the 16-bit wgmma's) (+)= A (64 x 32) @
// B (32 x N), asynchronously; acc = 0 overwrites d. FP8 wgmma reads both operands K-major only (no imm-trans: the
// transpose bits exist for 16-bit types alone), so A is M x K row-major and B is N x K row-major (b given as the
// K x N column-major view w.T of an N x K weight). A k32 step is 32 bytes along a 128-byte row, as a k16 step of
// halves is: the 128-byte-swizzled K-major descriptors of sm90.cuh (cumm_wg_desc_k, + 32 bytes a step) read a
// 128-deep slab of FP8 exactly as they read a 64-deep slab of halves.
#define CUMM_FP8_D4(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
#define CUMM_FP8_D16(i) CUMM_FP8_D4(i), CUMM_FP8_D4(i + 4), CUMM_FP8_D4(i + 8), CUMM_FP8_D4(i + 12)
template <int N>
struct CummWgmmaFp8;
template <int N>
__device__ __forceinline__ void cumm_wgmma_fp8(float (&d)[N / 2], unsigned long long a, unsigned long long b, int acc) {
    CummWgmmaFp8<N>::run(d, a, b, acc);
}
template <>
struct CummWgmmaFp8<64> {
    static __device__ __forceinline__ void run(float (&d)[32], unsigned long long a, unsigned long long b, int acc) {
        asm volatile(
            "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
            "wgmma.mma_async.sync.aligned.m64n64k32.f32." CUMM_FP8_A "." CUMM_FP8_B " {"
            "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,"
            "%24,%25,%26,%27,%28,%29,%30,%31"
            "}, %32, %33, p, 1, 1;\n}\n"
            : CUMM_FP8_D16(0), CUMM_FP8_D16(16)
            : "l"(a), "l"(b), "r"(acc));
    }
};
template <>
struct CummWgmmaFp8<128> {
    static __device__ __forceinline__ void run(float (&d)[64], unsigned long long a, unsigned long long b, int acc) {
        asm volatile(
            "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
            "wgmma.mma_async.sync.aligned.m64n128k32.f32." CUMM_FP8_A "." CUMM_FP8_B " {"
            "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,"
            "%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"
            "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63"
            "}, %64, %65, p, 1, 1;\n}\n"
            : CUMM_FP8_D16(0), CUMM_FP8_D16(16), CUMM_FP8_D16(32), CUMM_FP8_D16(48)
            : "l"(a), "l"(b), "r"(acc));
    }
};
template <>
struct CummWgmmaFp8<192> {
    static __device__ __forceinline__ void run(float (&d)[96], unsigned long long a, unsigned long long b, int acc) {
        asm volatile(
            "{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n"
            "wgmma.mma_async.sync.aligned.m64n192k32.f32." CUMM_FP8_A "." CUMM_FP8_B " {"
            "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,"
            "%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"
            "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,"
            "%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95"
            "}, %96, %97, p, 1, 1;\n}\n"
            : CUMM_FP8_D16(0), CUMM_FP8_D16(16), CUMM_FP8_D16(32), CUMM_FP8_D16(48), CUMM_FP8_D16(64), CUMM_FP8_D16(80)
            : "l"(a), "l"(b), "r"(acc));
    }
};
template <>
struct CummWgmmaFp8<256> {
    static __device__ __forceinline__ void run(float (&d)[128], unsigned long long a, unsigned long long b, int acc) {
        asm volatile(
            "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
            "wgmma.mma_async.sync.aligned.m64n256k32.f32." CUMM_FP8_A "." CUMM_FP8_B " {"
            "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,"
            "%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"
            "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,"
            "%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,"
            "%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,%112,%113,%114,%115,%116,%117,%118,%119,"
            "%120,%121,%122,%123,%124,%125,%126,%127"
            "}, %128, %129, p, 1, 1;\n}\n"
            : CUMM_FP8_D16(0), CUMM_FP8_D16(16), CUMM_FP8_D16(32), CUMM_FP8_D16(48), CUMM_FP8_D16(64), CUMM_FP8_D16(80), CUMM_FP8_D16(96), CUMM_FP8_D16(112)
            : "l"(a), "l"(b), "r"(acc));
    }
};
#undef CUMM_FP8_D16
#undef CUMM_FP8_D4

// The tile's scales at the end of the product: d (a warpgroup's MT m64 blocks, rows row0 + 64 m + 16 warp + g
// (+ 8), columns col0 + 8 j + 2 t4 (+ 1)) times sa[row * sa_step] * sb[col * sb_step]: a step of 0 is one scale for
// the whole operand (per-tensor), 1 a scale per row of A (M x 1) or per column of B (1 x N). Rows and columns past
// M, N read the last scale (their values are never stored). A NaN scale or product stays NaN.
template <int MT, int R>
__device__ __forceinline__ void cumm_fp8_scale_tile(float (&d)[MT][R], const float* __restrict__ sa, int sa_step,
                                                    const float* __restrict__ sb, int sb_step, int M, int N,
                                                    int row0, int col0, int warp, int g, int t4) {
    float ra[MT][2];
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int h = 0; h < 2; ++h) ra[m][h] = __ldg(sa + sa_step * min(row0 + m * 64 + warp * 16 + g + 8 * h, M - 1));
#pragma unroll
    for (int j = 0; j < R / 4; ++j) {
        const int col = col0 + 8 * j + 2 * t4;
        const float c0 = __ldg(sb + sb_step * min(col, N - 1)), c1 = __ldg(sb + sb_step * min(col + 1, N - 1));
#pragma unroll
        for (int m = 0; m < MT; ++m)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                d[m][4 * j + 2 * h] *= ra[m][h] * c0;
                d[m][4 * j + 2 * h + 1] *= ra[m][h] * c1;
            }
    }
}

// ---- The FP8 rungs' skeleton pieces (17_fp8_wgmma, 18_fp8_block_scaled) --------------------------------------
// setmaxnreg (cumm_ws_producer): all 65536 registers of a multiprocessor shared out, 232 a consumer thread beside
// the producer's 40 with one or two consumer warpgroups (WGS, the rung's macro), 160 beside 32 with three.
#define CUMM_FP8_CONSUMER_REGS (WGS == 3 ? 160 : 232)
#define CUMM_FP8_PRODUCER_REGS (WGS == 3 ? 32 : 40)
// A stage holds a TM x TN tile's TM rows of A then its TN rows of B (B's N x K rows), each row one 128-deep slab
// of K: 128 bytes, 128-byte swizzled (SB = (TM + TN) * 128 bytes a stage; TM, TN: the rungs' tile, whose names
// are the rungs' macros).

// The producer thread: every slab of every tile of the block's walk into the ring (TMA: TM rows of A at the tile's
// row o.x, TN rows of B at its column o.y, 128 k each). origin(t): tile t's first row and column. SCALES (block
// scales, 18): also the tile's TM scales of A for the slab's block of K (tmS: A's scales K-block-major) into the
// stage's scale row at scl + 4 TM s, counted by the same mbarrier.
template <int TM, int SB, int SCALES = 0, int NSTAGES, class Walk, class Origin>
__device__ __forceinline__ void cumm_fp8_produce(const CummRing<NSTAGES>& ring, const Walk& walk, Origin&& origin,
                                                 unsigned char* sm, const CummTmap* tmA, const CummTmap* tmB,
                                                 const CummTmap* tmS = nullptr, unsigned char* scl = nullptr) {
    int it = 0;  // slabs issued by this block, over all its tiles
    int t, k0, k1;
    for (int j = 0; walk.next(j, t, k0, k1); ++j) {
        const int2 o = origin(t);
        for (int kt = k0; kt < k1; ++kt, ++it) {
            const int kc = walk.slab(j, kt);
            const int s = ring.acquire(it, SB + (SCALES ? TM * 4 : 0));
            unsigned char* const st = sm + s * SB;
            cumm_tma_load(st, tmA, kc * 128, o.x, &ring.full[s]);             // TM rows of 128 k
            cumm_tma_load(st + TM * 128, tmB, kc * 128, o.y, &ring.full[s]);  // TN rows of 128 k
            if (SCALES) cumm_tma_load(scl + s * TM * 4, tmS, o.x, kc, &ring.full[s]);  // TM scales of block kc
        }
    }
}

// One 128-deep slab's wgmma (four k32 steps x MT m64 blocks) from a stage's A rows at a0 and B rows at b0 (shared
// addresses) into p: FRESH = 1 starts p over (a partial set, promoted afterwards), 0 adds into it. Each operand's
// descriptor is made once a slab and stepped by constants (an address is its low field, in 16-byte units: shared
// addresses below 256 KB never carry out of it), not rebuilt per wgmma from the address (mask, shift, or, and two
// moves to uniform registers each: half the consumer's instructions a slab beside the promotion's adds).
template <int MT, int TN, int FRESH>
__device__ __forceinline__ void cumm_fp8_slab(float (&p)[MT][TN / 2], unsigned a0, unsigned b0) {
    const unsigned long long da = cumm_wg_desc_k(a0), db = cumm_wg_desc_k(b0);
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
#pragma unroll
        for (int m = 0; m < MT; ++m)
            cumm_wgmma_fp8<TN>(p[m], da + (m * 64 * 128 + 32 * kk) / 16, db + 32 * kk / 16, FRESH ? kk > 0 : 1);
}

// Promotion: a done partial set p (pinned: its wgmma have completed) added into the FP32 totals d.
template <int MT, int R>
__device__ __forceinline__ void cumm_fp8_promote(float (&d)[MT][R], float (&p)[MT][R]) {
#pragma unroll
    for (int m = 0; m < MT; ++m) {
        cumm_wgmma_pin(p[m]);
#pragma unroll
        for (int e = 0; e < R; ++e) d[m][e] += p[m][e];
    }
}

// A warpgroup's tile to C (rows row0.., columns col0..): the TMA-store epilogue (TMA: 16-bit C, aligned) where the
// tile's columns end on a 16-byte boundary (as 14), else direct stores; no alpha, beta (the scales are in d).
template <int MT, int TN, int VEC, int TMA, class Epi>
__device__ __forceinline__ void cumm_fp8_store(Epi& epi, float (&d)[MT][TN / 2], cumm_out_t* __restrict__ C, int ldc,
                                               int M, int N, int row0, int col0, int warp, int g, int t4) {
    if (TMA && (N % 8 == 0 || col0 + TN <= N)) {
        epi.store(d, col0, row0, 0, 1.0f, 0.0f);
        return;
    }
    cumm_store_tile<MT, TN / 2, VEC>(d, C, 0, ldc, M, N, row0, col0, warp, g, t4, 1.0f, 0.0f);
}
