"""FP8 on the GPU (sm_90a): cumm.scaled_matmul against a float64 product of the dequantized inputs, output
NaN-poisoned first, beside torch._scaled_mm's error on the same inputs. Errors are printed (pytest -s) for the
docs: per-tensor vs torch, block-scaled with and without promotion at K = 4096 and 16384."""

from __future__ import annotations

import pytest

import cumm
from cumm.core.dtypes import FP8_TOLERANCE

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")

E4, E5 = torch.float8_e4m3fn, torch.float8_e5m2
FMAX = {E4: 448.0, E5: 57344.0}


@pytest.fixture(autouse=True)
def _hopper():
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the FP8 rungs run on sm_90a only")


def quant(x, fmt, rowwise: bool):
    """x (float32) -> (fp8 tensor, float32 scale: (rows, 1) or ()) with x ~ q * scale."""
    amax = x.abs().amax(dim=1, keepdim=True) if rowwise else x.abs().amax()
    s = (amax / FMAX[fmt]).clamp(min=1e-12).float()
    return (x / s).to(fmt), s


def ref(a, b, sa, sb):
    return (a.double() * sa.double()) @ (b.double() * sb.double())


def rel(c, r):
    return ((c.double() - r).norm() / r.norm()).item()


def _pad16(x, rows: int, cols: int):
    """x (FP8, rows' x cols') zero-padded to rows x cols (zeros add nothing to a product)."""
    out = torch.zeros(rows, cols, dtype=torch.uint8, device=x.device)
    out[: x.shape[0], : x.shape[1]].copy_(x.view(torch.uint8))
    return out.view(x.dtype)


def torch_rel(a, b, sa, sb, r, out_dtype=torch.bfloat16, fast=False):
    """torch._scaled_mm's (cuBLAS FP8's) error against r on these inputs, with this out dtype: the yardstick of the
    issue (cumm's error no worse than 1.5x it). cuBLAS needs every dimension a multiple of 16, so the operands are
    zero-padded (the product is unchanged) and the result cut back; where this torch refuses the scales with this
    out dtype (per-row scales are bf16-only in some versions), it runs with unit scales, FP32 out, and the scales
    and the rounding to out_dtype are applied after, as cumm's epilogue does."""
    (M, K), N = a.shape, b.shape[1]
    up = lambda n: -(-n // 16) * 16  # noqa: E731
    ap, bp = _pad16(a, up(M), up(K)), _pad16(b.t(), up(N), up(K)).t()
    pad = torch.nn.functional.pad
    spa = sa if sa.numel() == 1 else pad(sa, (0, 0, 0, up(M) - M), value=1.0)  # (M, 1): ones under the zero rows
    spb = sb if sb.numel() == 1 else pad(sb, (0, up(N) - N), value=1.0)
    try:
        t = torch._scaled_mm(ap, bp, scale_a=spa, scale_b=spb, out_dtype=out_dtype, use_fast_accum=fast)
    except RuntimeError:
        u = torch.ones((), device="cuda")
        t = torch._scaled_mm(ap, bp, scale_a=u, scale_b=u, out_dtype=torch.float32, use_fast_accum=fast)
        t = (t * spa * spb).to(out_dtype)
    return rel(t[:M, :N], r)


# FP32 rounding of the epilogue (a * (sa * sb) against (a * sa) * sb): the floor under the relative criterion where
# torch's own error is zero (K = 1, float32 out)
FLOOR = 4 * torch.finfo(torch.float32).eps


def run(a, b, sa, sb, out_dtype=torch.bfloat16, **kw):
    out = torch.full((a.shape[0], b.shape[1]), float("nan"), dtype=out_dtype, device="cuda")
    c = cumm.scaled_matmul(a, b, sa, sb, out_dtype=out_dtype, out=out, **kw)
    torch.cuda.synchronize()
    assert c is out
    return c


def operands(M, N, K, fa=E4, fb=E4, rowwise=False):
    x = torch.randn(M, K, device="cuda")
    w = torch.randn(N, K, device="cuda")
    a, sa = quant(x, fa, rowwise)
    wq, sw = quant(w, fb, rowwise)
    return a, wq.t(), sa, (sw.t() if rowwise else sw)  # b: the (K, N) column-major view, scale (1, N)


@pytest.mark.parametrize("fmts", [(E4, E4), (E4, E5), (E5, E4)])
@pytest.mark.parametrize("rowwise", [False, True])
@pytest.mark.parametrize("fast", [False, True])
def test_against_torch_scaled_mm(fmts, rowwise, fast):
    a, b, sa, sb = operands(2048, 2048, 4096, *fmts, rowwise=rowwise)
    r = ref(a, b, sa, sb)
    c = run(a, b, sa, sb, use_fast_accum=fast)
    t = torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16, use_fast_accum=fast)
    e, et = rel(c, r), rel(t, r)
    print(f"fmts {fmts} rowwise {rowwise} fast {fast}: cumm {e:.3e} torch {et:.3e}")
    assert not c.isnan().any() and e <= 1.5 * et, (e, et)


def test_e5m2_times_e5m2_against_float64():
    """A fixed bound: torch._scaled_mm refuses e5m2 @ e5m2, so there is no cuBLAS error to compare with (e5m2's
    2-bit mantissa: about 2^-3 relative per element, averaged over K)."""
    a, b, sa, sb = operands(512, 384, 1024, E5, E5)
    c = run(a, b, sa, sb)
    assert rel(c, ref(a, b, sa, sb)) < FP8_TOLERANCE


@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize(
    "shape",
    [(1, 1, 1), (1, 37, 16), (97, 1, 64), (127, 131, 257), (4097, 129, 160), (64, 4097, 48)]
    + [(33, 65, k) for k in range(1, 17)],
)
def test_odd_shapes(shape, out_dtype):
    M, N, K = shape
    a, b, sa, sb = operands(M, N, K, rowwise=True)
    c = run(a, b, sa, sb, out_dtype=out_dtype)
    r = ref(a, b, sa, sb)
    e, et = rel(c, r), torch_rel(a, b, sa, sb, r, out_dtype)
    assert not c.isnan().any() and e <= 1.5 * et + FLOOR, (e, et)


def _named(kernel: str) -> list:
    return [None, *(dict(c) for c in cumm.kernel_spec(kernel).configs.values())]


@pytest.mark.parametrize("config", _named("fp8_wgmma"), ids=lambda c: "default" if c is None else str(c))
@pytest.mark.parametrize("fmts", [(E4, E4), (E5, E4)])
@pytest.mark.parametrize("shape", [(1, 1, 16), (193, 131, 1000), (385, 257, 4096)])
def test_named_configurations(shape, fmts, config):
    """Every named configuration of the per-tensor rung (three warpgroups of 64 x 128 included: 192-row tiles,
    one partial set) on odd shapes, rows past a 192-row tile included, against float64 and torch's error."""
    M, N, K = shape
    a, b, sa, sb = operands(M, N, K, *fmts, rowwise=True)
    c = run(a, b, sa, sb, kernel="fp8_wgmma", config=config)
    r = ref(a, b, sa, sb)
    e, et = rel(c, r), torch_rel(a, b, sa, sb, r)
    assert not c.isnan().any() and e <= 1.5 * et + FLOOR, (e, et)


@pytest.mark.parametrize("layout", ["row_major_b", "column_major_a", "offset_a"])
def test_copied_operands(layout):
    a, b, sa, sb = operands(300, 200, 512, rowwise=True)
    if layout == "row_major_b":
        b = b.contiguous()  # (K, N) row-major: a transposed copy
    elif layout == "column_major_a":
        a = a.t().contiguous().t()
    else:  # a view 1 byte in: off the copy engine's 16 bytes
        big = torch.zeros(300, 513, dtype=torch.uint8, device="cuda")
        big[:, 1:].copy_(a.view(torch.uint8))
        a = big[:, 1:].view(E4)
    c = run(a, b, sa, sb)
    r = ref(a, b, sa, sb)
    e, et = rel(c, r), torch_rel(a.contiguous(), b.t().contiguous().t(), sa, sb, r)
    assert e <= 1.5 * et + FLOOR, (e, et)


def test_nan_propagates():
    a, b, sa, sb = operands(256, 256, 512)
    a = a.clone()
    a.view(torch.uint8)[7, 100] = 0x7F  # e4m3fn NaN
    c = run(a, b, sa, sb)
    assert c[7].isnan().all() and not c[8].isnan().any()
    c = run(*operands(256, 256, 512)[:3], torch.tensor(float("nan"), device="cuda"))
    assert c.isnan().all()


def block_operands(M, N, K, fa=E4, fb=E4, uniform=False, spread=False):
    """DeepSeek-V3 quantization: A per 1 x 128 block, B per 128 x 128 block (uniform: one scale each; spread: each
    block of K of A and of B scaled by its own power of two from 2^-5 to 2^5, so a block's scale read at the wrong
    block of K shows in the error)."""
    kb, nb = -(-K // 128), -(-N // 128)
    x = torch.randn(M, K, device="cuda")
    w = torch.randn(N, K, device="cuda")
    if spread:
        k = torch.arange(K, device="cuda") // 128
        x, w = x * torch.exp2((k * 5 % 11 - 5).float()), w * torch.exp2((k * 3 % 11 - 5).float())
    xp = torch.nn.functional.pad(x, (0, kb * 128 - K)).view(M, kb, 128)
    wp = torch.nn.functional.pad(w, (0, kb * 128 - K, 0, nb * 128 - N)).view(nb, 128, kb, 128)
    if uniform:
        sa = (x.abs().amax() / FMAX[fa]).expand(M, kb).contiguous()
        sb = (w.abs().amax() / FMAX[fb]).expand(nb, kb).contiguous()
    else:
        sa = (xp.abs().amax(dim=2) / FMAX[fa]).clamp(min=1e-12)
        sb = (wp.abs().amax(dim=(1, 3)) / FMAX[fb]).clamp(min=1e-12)
    a = (xp / sa[:, :, None]).view(M, kb * 128)[:, :K].to(fa)
    wq = (wp / sb[:, None, :, None]).reshape(nb * 128, kb * 128)[:N, :K].to(fb)
    ra = a.double() * sa.double().repeat_interleave(128, 1)[:, :K]
    rb = wq.double() * sb.double().repeat_interleave(128, 0).repeat_interleave(128, 1)[:N, :K]
    return a, wq.t(), sa, sb, ra @ rb.t()


@pytest.mark.parametrize("fmts", [(E4, E4), (E4, E5), (E5, E4)])
@pytest.mark.parametrize("shape", [(1, 1, 1), (129, 300, 1000), (4097, 127, 16), (77, 1031, 16)])
def test_block_scaled(shape, fmts):
    a, b, sa, sb, r = block_operands(*shape, *fmts)
    c = run(a, b, sa, sb)
    assert not c.isnan().any() and rel(c, r) < FP8_TOLERANCE


@pytest.mark.parametrize(
    "config",
    [
        None,
        {"PROMO": 1},
        {"BM": 64, "WGS": 1, "NUM_THREADS": 256, "STAGES": 8},
        {"EPI": 0, "BN": 64},
        {"BM": 192, "WGS": 3, "NUM_THREADS": 512, "PROMO": 1, "STAGES": 4},
    ],
)
def test_block_scales_travel_with_the_stage(config):
    """A's block scales reach the kernel through the copy engine, K-block-major: a K-block-major tensor (pitch M
    rounded up to 4) is read in place, any other layout copied on every call (a cached call with new scales sees
    them). Odd M (rows past M get zero scales from the copy engine), every configuration family."""
    M, N, K = 203, 300, 1000
    a, b, sa, sb, r = block_operands(M, N, K)
    kb, pitch = sa.shape[1], -(-M // 4) * 4
    km = torch.empty(kb, pitch, device="cuda")
    km[:, :M] = sa.t()
    in_place = km[:, :M].t()  # (M, kb), strides (1, pitch)
    for s in (sa, in_place, sa.t().contiguous().t()):
        c = run(a, b, s, sb, kernel="fp8_block_scaled", config=config)
        assert not c.isnan().any() and rel(c, r) < FP8_TOLERANCE
    c = run(a, b, sa * 2, sb, kernel="fp8_block_scaled", config=config)  # (the same key: the cached call)
    assert rel(c, 2 * r) < FP8_TOLERANCE


@pytest.mark.parametrize(
    "config",
    [
        None,
        {"PROMO": 1},
        {"BM": 64, "WGS": 1, "NUM_THREADS": 256, "STAGES": 8},
        {"BM": 192, "WGS": 3, "NUM_THREADS": 512, "PROMO": 1, "STAGES": 4},
    ],
)
def test_block_scales_vary_along_k(config):
    """B's scales reach a step 32 blocks of K at a time: K of 71 blocks (the last one partial) crosses two such
    chunks, and more tiles than SMs make blocks walk their second tile's K backwards; every block of K has its own
    power-of-two scale, so a scale read at the wrong block is a large error."""
    a, b, sa, sb, r = block_operands(2048, 2048, 70 * 128 + 5, spread=True)
    c = run(a, b, sa, sb, kernel="fp8_block_scaled", config=config)
    assert not c.isnan().any() and rel(c, r) < FP8_TOLERANCE


@pytest.mark.parametrize("K", [4096, 16384])
def test_block_scaled_error_with_and_without_promotion(K):
    """Reported (pytest -s): promotion against the whole K in the tensor core, uniform block scales (where both are
    right), beside the per-tensor rung with promotion on the same data."""
    a, b, sa, sb, r = block_operands(1024, 1024, K, uniform=True)
    promo = rel(run(a, b, sa, sb), r)
    nopromo = rel(run(a, b, sa, sb, kernel="fp8_block_scaled", config={"PROMO": 0}), r)
    tensor = rel(run(a, b, sa[:1, :1].reshape(()), sb[:1, :1].reshape(())), r)
    fast = rel(run(a, b, sa[:1, :1].reshape(()), sb[:1, :1].reshape(()), use_fast_accum=True), r)
    ga, gb, gsa, gsb, gr = block_operands(1024, 1024, K)
    fine = rel(run(ga, gb, gsa, gsb), gr)
    print(
        f"K={K}: block promo {promo:.3e} no-promo {nopromo:.3e} per-tensor {tensor:.3e} fast {fast:.3e} "
        f"block (fine scales) {fine:.3e}"
    )
    assert promo < FP8_TOLERANCE and fine < FP8_TOLERANCE and abs(promo - tensor) < 1e-3


# ---- FP8 output: C = cast(v * scale_result), saturating (include/fp8_out.cuh) -----------------------------------
# Two references. The kernel's own FP32 result v (the same configuration with a float32 C: the same accumulators)
# times scale_result, saturated and cast by torch: equal element for element (the cast is exactly torch's, with
# saturation). And a result summed otherwise, w (float64; cuBLAS's FP32): FP8 wgmma adds each 128-deep slab's
# products with fewer bits than FP32 before the promotion (DeepSeek-V3 3.3), so results near zero (cancellation)
# differ from float64's by several of FP8's finest steps there (e4m3's 2^-9, e5m2's 2^-16, in C's units; H200:
# up to 12 and 124 steps, on at most 0.65 % of the elements), and a few elsewhere by more than 2^-12 of the largest
# result. So each element's difference must be what the sums' own difference explains, |c - cast(w)| <= |v - w| +
# the FP8 spacing at both (each cast moves a value by at most half a step), and all but 2 % of them equal.


def run_fp8(a, b, sa, sb, fmt, sr=None, out=None, **kw):
    """scaled_matmul into an FP8 C poisoned with 0xFF bytes (NaN in both formats) first."""
    if out is None:
        out = torch.empty((a.shape[0], b.shape[1]), dtype=torch.uint8, device="cuda").view(fmt)
    out.view(torch.uint8).fill_(0xFF)
    c = cumm.scaled_matmul(a, b, sa, sb, out_dtype=fmt, out=out, scale_result=sr, **kw)
    torch.cuda.synchronize()
    assert c is out
    return c


def cast_ref(r, sr, fmt):
    """r times scale_result (in r's precision), saturated to the format's largest finite value (as cvt.rn.satfinite;
    NaN stays NaN), rounded to FP8 by torch's own cast."""
    v = r if sr is None else r * sr.to(r.dtype)
    return v.clamp(-FMAX[fmt], FMAX[fmt]).to(fmt)


def ulps(c, r):
    """Per element: how many FP8 values apart c and r are (ordered sign-magnitude codes; +0 and -0 alike)."""

    def order(x):
        u = x.view(torch.uint8).to(torch.int32)
        return torch.where(u >= 128, -(u - 128), u)

    return (order(c) - order(r)).abs()


def assert_same(c, want, what=""):
    """Equal values (+0 and -0 alike), NaN exactly where want has NaN."""
    cf, wf = c.float(), want.float()
    assert torch.equal(cf.isnan(), wf.isnan()), (what, int(cf.isnan().sum()), int(wf.isnan().sum()))
    bad = (cf != wf) & ~wf.isnan()
    assert not bad.any(), (what, int(bad.sum()), cf[bad][:4].tolist(), wf[bad][:4].tolist())


MAX_CODE = {E4: 0x7E, E5: 0x7B}  # the largest finite magnitude's code (past it: NaN; e5m2: inf, then NaN)


def spacing(x):
    """Per element of the FP8 tensor x: the larger gap to its neighbouring magnitudes (the format's step there)."""
    fmt = x.dtype
    top = MAX_CODE[fmt]
    lut = torch.arange(top + 1, dtype=torch.uint8, device=x.device).view(fmt).double()
    gaps = lut[1:] - lut[:-1]
    step = torch.maximum(torch.cat([gaps, gaps[-1:]]), torch.cat([gaps[:1], gaps]))
    return step[(x.view(torch.uint8) & 0x7F).long().clamp(max=top)]


def assert_fp8_close(c, want, v, w, what="", frac=0.02):
    """c (= cast(v), checked by assert_same) against want = cast(w), w summed otherwise: NaN where want has NaN, each
    difference within |v - w| plus the FP8 spacing at c and at want (the header above), at most ``frac`` of the
    elements not equal. Returns how many are not equal."""
    cf, wf = c.double(), want.double()
    wn = wf.isnan()
    assert torch.equal(cf.isnan(), wn), (what, int(cf.isnan().sum()), int(wn.sum()))
    ok = ~wn
    if not ok.any():
        return 0
    bound = (v.double() - w.double()).abs() + spacing(c) + spacing(want)
    far = ((cf - wf).abs() > bound) & ok
    off = int(((cf != wf) & ok).sum())
    assert not far.any() and off <= max(2, frac * int(ok.sum())), (what, int(far.sum()), off)
    return off


def fitting_scale(r, fmt, over=0.5):
    """A scale_result that brings r's largest magnitude to ``over`` times the format's largest finite value."""
    return (over * FMAX[fmt] / r.abs().max().clamp(min=1e-30)).float().reshape(())


def twin(a, b, sa, sb, **kw):
    """The same product with a float32 C: the configuration the FP8 C's call runs, its FP32 results before the cast."""
    return run(a, b, sa, sb, out_dtype=torch.float32, **kw)


FP8_OUT_SHAPES = [(1, 1, 16), (1, 1, 1), (37, 24, 48), (33, 65, 7), (127, 131, 257), (4097, 264, 272)]
FP8_OUT_SHAPES += [(4097, 256, 272), (64, 4097, 48), (300, 512, 1000)]


@pytest.mark.parametrize("fmt", [E4, E5])
@pytest.mark.parametrize("rowwise", [False, True])
@pytest.mark.parametrize("shape", FP8_OUT_SHAPES)
def test_fp8_out_against_float64(shape, rowwise, fmt):
    """Per-tensor and per-row / per-column scales, both FP8 outputs, odd shapes (N not on 16 bytes: byte stores;
    K not a multiple of 16: the padded copy): the kernel's own FP32 result cast by torch, exactly; float64."""
    M, N, K = shape
    a, b, sa, sb = operands(M, N, K, rowwise=rowwise)
    r = ref(a, b, sa, sb)
    sr = fitting_scale(r, fmt)
    c = run_fp8(a, b, sa, sb, fmt, sr)
    v = twin(a, b, sa, sb) * sr
    assert_same(c, cast_ref(v, None, fmt), shape)
    off = assert_fp8_close(c, cast_ref(r, sr, fmt), v, r * sr.double(), shape)
    print(f"fp8 out {fmt} {shape} rowwise {rowwise}: {off} of {M * N} not float64's")


def _semantics(t, v32, sr, fmt) -> str:
    """Which cast of the FP32 result v32 torch's FP8 output t is: the fraction of elements equal to each."""
    tf = t.float()
    eq = lambda w: float((w.float() == tf).float().mean())  # noqa: E731
    return (
        f"torch == cast(v * s) {eq(cast_ref(v32, sr, fmt)):.4f}, cast(v / s) {eq(cast_ref(v32, 1 / sr, fmt)):.4f}, "
        f"cast(v) {eq(cast_ref(v32, None, fmt)):.4f}"
    )


@pytest.mark.parametrize("fmt", [E4, E5])
@pytest.mark.parametrize("over", [0.5, 4.0])
@pytest.mark.parametrize("fmts", [(E4, E4), (E4, E5), (E5, E4)])
def test_fp8_out_against_torch_scaled_mm(fmts, over, fmt):
    """Against cuBLAS's FP8 output on the same inputs (per-tensor scales). torch 2.11 on the H200 drops
    scale_result: its FP8 C was the cast of its FP32 result unscaled, element for element, in every case (printed
    here; torch's own docs: "the scale of the output"), so cuBLAS gets the scale folded into scale_a (its D is
    cast(acc * scale_a * scale_b)). over = 4: much of the range overflows, which both saturate to the format's
    largest finite value (PTX's f32 -> FP8 conversions exist only with .satfinite)."""
    a, b, sa, sb = operands(512, 384, 1024, *fmts)
    r = ref(a, b, sa, sb)
    sr = fitting_scale(r, fmt, over)
    c = run_fp8(a, b, sa, sb, fmt, sr)
    v = twin(a, b, sa, sb) * sr
    assert_same(c, cast_ref(v, None, fmt), (fmts, over, fmt))
    assert_fp8_close(c, cast_ref(r, sr, fmt), v, r * sr.double(), ("float64", fmts, over, fmt))
    if over > 1:
        assert int((c.float().abs() == FMAX[fmt]).sum()) > c.numel() // 20
    try:
        t = torch._scaled_mm(a, b, scale_a=sa * sr, scale_b=sb, out_dtype=fmt)
    except RuntimeError as e:  # (cuBLAS takes some format triples only)
        pytest.skip(f"torch._scaled_mm refuses {fmts} -> {fmt}: {str(e)[:120]}")
    w = torch._scaled_mm(a, b, scale_a=sa * sr, scale_b=sb, out_dtype=torch.float32)
    off = assert_fp8_close(c, t, v, w, ("torch", fmts, over, fmt))
    ts = torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, scale_result=sr, out_dtype=fmt)
    t32 = torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.float32)
    print(
        f"torch {fmts} -> {fmt} over {over}: cumm vs cuBLAS {off} of {c.numel()} not equal; with scale_result: "
        f"{_semantics(ts, t32, sr, fmt)}"
    )


def _fast(config) -> bool:
    return config is not None and config.get("PROMO") == 0


@pytest.mark.parametrize("fmt", [E4, E5])
@pytest.mark.parametrize("config", _named("fp8_wgmma"), ids=lambda c: "default" if c is None else str(c))
def test_fp8_out_named_configurations(config, fmt):
    """Every named configuration of the per-tensor rung with an FP8 C (fast_accum's 128 x 256 tiles, one and
    three consumer warpgroups), rows past a tile, an N that is not on 16 bytes."""
    a, b, sa, sb = operands(385, 300, 1000, rowwise=True)
    r = ref(a, b, sa, sb)
    sr = fitting_scale(r, fmt)
    kw = dict(kernel="fp8_wgmma", config=config, use_fast_accum=_fast(config))
    c = run_fp8(a, b, sa, sb, fmt, sr, **kw)
    v = twin(a, b, sa, sb, **kw) * sr
    assert_same(c, cast_ref(v, None, fmt), (config, fmt))
    frac = 0.1 if _fast(config) else 0.02  # (the whole K in FP8 accumulators: use_fast_accum's error)
    assert_fp8_close(c, cast_ref(r, sr, fmt), v, r * sr.double(), (config, fmt), frac)


@pytest.mark.parametrize("fmt", [E4, E5])
@pytest.mark.parametrize("config", _named("fp8_block_scaled"), ids=lambda c: "default" if c is None else str(c))
@pytest.mark.parametrize("shape", [(1, 1, 200), (37, 24, 300), (129, 300, 1000), (4097, 264, 272)])
def test_fp8_out_block_scaled(shape, config, fmt):
    """DeepSeek-V3 block scales with an FP8 C (K past one block: smaller scale shapes read as per-row ones), every
    named configuration (no_promotion with uniform scales, where it is right)."""
    a, b, sa, sb, r = block_operands(*shape, uniform=_fast(config))
    sr = fitting_scale(r, fmt)
    kw = dict(kernel="fp8_block_scaled", config=config)
    c = run_fp8(a, b, sa, sb, fmt, sr, **kw)
    v = twin(a, b, sa, sb, **kw) * sr
    assert_same(c, cast_ref(v, None, fmt), (shape, config, fmt))
    frac = 0.1 if _fast(config) else 0.02
    assert_fp8_close(c, cast_ref(r, sr, fmt), v, r * sr.double(), (shape, config, fmt), frac)


def test_fp8_out_scale_result_defaults_to_one_and_is_read_per_call():
    """No scale_result: 1 (torch's default); a cached call with another scale_result tensor reads it; an odd out
    pointer (byte stores) and a row pitch past N, nothing written outside out."""
    a, b, sa, sb = operands(200, 160, 512)
    v = twin(a, b, sa, sb)
    sa2 = sa * fitting_scale(v, E4, 0.9)  # (the result fits without scale_result)
    v2 = twin(a, b, sa2, sb)
    assert_same(run_fp8(a, b, sa2, sb, E4), cast_ref(v2, None, E4), "no scale_result")
    for k in (0.25, 1.0, 3.0):
        sr = torch.tensor(k, device="cuda")
        assert_same(run_fp8(a, b, sa2, sb, E4, sr), cast_ref(v2, sr, E4), k)
    big = torch.full((200, 171), 0xFF, dtype=torch.uint8, device="cuda")
    out = big[:, 1:161].view(E4)  # pointer 1 byte in, pitch 171
    s = fitting_scale(v, E4)
    assert_same(run_fp8(a, b, sa, sb, E4, s, out=out), cast_ref(v, s, E4), "odd out")
    assert (big[:, 0] == 0xFF).all() and (big[:, 161:] == 0xFF).all()


def test_fp8_out_nan_and_saturation():
    """A NaN input row gives a NaN row (NaN stays NaN through the saturating cast); infinite scale_result
    saturates every finite nonzero value to +-max; a NaN scale_result makes every element NaN."""
    a, b, sa, sb = operands(256, 256, 512)
    a = a.clone()
    a.view(torch.uint8)[7, 100] = 0x7F
    for fmt in (E4, E5):
        c = run_fp8(a, b, sa, sb, fmt, torch.tensor(1.0, device="cuda")).float()
        assert c[7].isnan().all() and not c[8].isnan().any()
        c = run_fp8(a, b, sa, sb, fmt, torch.tensor(float("inf"), device="cuda")).float()
        assert (c[8].abs() == FMAX[fmt]).all() and c[7].isnan().all()
        c = run_fp8(a[8:], b, sa, sb, fmt, torch.tensor(float("nan"), device="cuda")).float()
        assert c.isnan().all()
