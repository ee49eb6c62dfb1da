"""An FP8 C from cumm.matmul's bfloat16 / float16 products on the GPU (sm_89+; the wgmma rungs sm_90a): element for
element the saturating cast of the same rung's float32 C times scale_result (a bias, relu and residual, which a
float32 C holds exactly), and against float64 beside torch's unfused product-then-cast on the same inputs; the
output NaN-poisoned first (0xFF bytes: NaN in both formats); saturation and NaN, batches, odd shapes, outs off
the 2-byte grid, strided and transposed outs, the cached path with a new scale, and the errors."""

from __future__ import annotations

import pytest

import cumm

from .test_fp8_gpu import E4, E5, FMAX, assert_same, cast_ref

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")

_WGMMA = {"wgmma", "wgmma_ws", "wgmma_pingpong", "wgmma_swap_ab", "wgmma_cluster_split_k"}


@pytest.fixture(autouse=True)
def _fp8_device():
    if torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("an FP8 C needs compute capability 8.9 or newer")


def _skip_wgmma(kernel):
    if kernel in _WGMMA and torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the wgmma rungs run on sm_90a only")


def _poisoned(shape, fmt):
    return torch.full(shape, 0xFF, dtype=torch.uint8, device="cuda").view(fmt)


def _scale(r, fmt, over):
    """A scale bringing r's largest magnitude to ``over`` times the format's largest finite value."""
    return (over * FMAX[fmt] / r.abs().max().double().clamp(min=1e-30)).float().reshape(())


# (kernel, config, inputs' dtype, C's format): every store path of the 16-bit rungs (tile stores, pair stores,
# single elements)
CASES = [
    ("wgmma_ws", {}, torch.bfloat16, E4),
    ("wgmma_ws", {}, torch.float16, E5),
    ("wgmma_pingpong", dict(BM=128, BN=192, STAGES=4), torch.bfloat16, E4),
    ("wgmma", {}, torch.float16, E4),
    ("mma_swizzled_pipeline", {}, torch.bfloat16, E5),
    ("wgmma_cluster_split_k", {}, torch.bfloat16, E4),
    ("skinny16", {}, torch.bfloat16, E4),
    ("wgmma_swap_ab", {}, torch.float16, E4),
]
# N % 16 == 0: C's rows on 16 bytes, the TMA rungs' copy-engine store of bytes; else direct stores
SHAPES = [(1, 1, 1), (127, 131, 136), (64, 4097, 1), (257, 264, 300), (300, 512, 64), (4097, 384, 128)]


@pytest.mark.parametrize(("kernel", "config", "dt", "fmt"), CASES, ids=[f"{c[0]}-{c[2]}-{c[3]}" for c in CASES])
@pytest.mark.parametrize(("M", "N", "K"), SHAPES)
def test_fp8_c_is_the_cast_of_the_float32_c(kernel, config, dt, fmt, M, N, K):
    """FP8 C = sat(scale * v) for v the same rung's float32 C (alpha, a per-column bias, relu, a residual); then a
    scale past the format's range (the cached call, a new scale tensor): every value saturates to the largest
    finite one, none becomes NaN."""
    _skip_wgmma(kernel)
    a = torch.randn(M, K, device="cuda", dtype=dt)
    b = torch.randn(K, N, device="cuda", dtype=dt)
    bias = torch.randn(N, device="cuda", dtype=dt)
    res = torch.randn(M, N, device="cuda", dtype=dt)
    kw = dict(kernel=kernel, config=config, alpha=0.75, bias=bias, activation="relu", residual=res)
    v = cumm.matmul(a, b, out=torch.full((M, N), float("nan"), device="cuda"), **kw)
    for over in (0.5, 3.0):  # (the second call: the cached launch with a new scale's pointer)
        s = _scale(v, fmt, over)
        c = cumm.matmul(a, b, out=_poisoned((M, N), fmt), scale_result=s, **kw)
        torch.cuda.synchronize()
        assert c.dtype == fmt and c.shape == (M, N)
        assert_same(c, cast_ref(v, s, fmt), f"{kernel} over={over}")
    assert c.float().abs().max().item() == FMAX[fmt] or v.abs().max().item() == 0


def _gelu_tanh64(x):
    return 0.5 * x * (1 + torch.tanh((2 / torch.pi) ** 0.5 * (x + 0.044715 * x**3)))


def _rel(c, r):
    return ((c.double() - r).norm() / r.norm().clamp(min=1e-300)).item()


@pytest.mark.parametrize("kernel", ["auto", "wgmma_ws", "wgmma_pingpong"])
@pytest.mark.parametrize("dt", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("fmt", [E4, E5])
@pytest.mark.parametrize(("M", "N", "K"), [(1, 1, 1), (127, 131, 136), (4097, 300, 256), (512, 1024, 4096)])
def test_fp8_c_against_float64_beside_torch(kernel, dt, fmt, M, N, K):
    """bias + gelu_tanh, cast to FP8 with a scale: ‖C / scale - ref‖ / ‖ref‖ (ref in float64) within 5 % of torch's
    unfused F.gelu(a @ b + bias) in dt then the same saturating cast (ours rounds once, from FP32)."""
    _skip_wgmma(kernel)
    a = torch.randn(M, K, device="cuda", dtype=dt)
    b = torch.randn(K, N, device="cuda", dtype=dt)
    bias = torch.randn(N, device="cuda", dtype=dt)
    ref = _gelu_tanh64(a.double() @ b.double() + bias.double())
    s = _scale(ref, fmt, 0.5)
    c = cumm.matmul(a, b, kernel=kernel, out=_poisoned((M, N), fmt), scale_result=s, bias=bias, activation="gelu_tanh")
    t = cast_ref(torch.nn.functional.gelu(a @ b + bias, approximate="tanh").float(), s, fmt)
    ours, theirs = _rel(c.double() / s.double(), ref), _rel(t.double() / s.double(), ref)
    print(f"{kernel} {dt} {fmt} {M}x{N}x{K}: ours {ours:.3e} torch {theirs:.3e}")
    assert not c.float().isnan().any() and ours <= 1.05 * theirs + 1e-6, (ours, theirs)


@pytest.mark.parametrize(
    ("shape_a", "shape_b"), [((3, 65, 40), (40, 136)), ((2, 65, 40), (2, 40, 136)), ((4, 1, 64), (4, 64, 8))]
)
def test_fp8_c_batched(shape_a, shape_b):
    """Batches (one b for the batch: stacked rows; a b per product: the batched variants) against float64."""
    a = torch.randn(shape_a, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(shape_b, device="cuda", dtype=torch.bfloat16)
    ref = a.double() @ b.double()
    s = _scale(ref, E4, 0.5)
    c = cumm.matmul(a, b, out=_poisoned(ref.shape, E4), scale_result=s)
    t = cast_ref((a @ b).float(), s, E4)
    ours, theirs = _rel(c.double() / s.double(), ref), _rel(t.double() / s.double(), ref)
    assert ours <= 1.05 * theirs + 1e-6, (ours, theirs)


@pytest.mark.parametrize("kernel", ["auto", "wgmma_ws", "wgmma_pingpong"])
def test_fp8_c_layouts_and_nan(kernel):
    """A C whose rows are an odd number of bytes apart, one off the 2-byte grid (byte stores), rows 144 bytes apart
    (the copy engine's store, the last tile's columns across N = 130 stored directly), and a transposed view
    (staged, copied back) equal the contiguous C, the bytes between N and a row's pitch untouched; NaN in a row of
    a stays NaN in C's row; no scale: 1."""
    _skip_wgmma(kernel)
    M, N, K = 67, 130, 96
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(K, 136, device="cuda", dtype=torch.bfloat16)[:, :N]  # (rows on 16 bytes: the copy engine reads b)
    bias = torch.randn(N, device="cuda", dtype=torch.bfloat16)
    a[5, 7] = float("nan")
    kw = dict(kernel=kernel, bias=bias)
    want = cumm.matmul(a, b, out=_poisoned((M, N), E4), **kw)
    torch.cuda.synchronize()
    assert want[5].float().isnan().all() and not want[torch.arange(M) != 5].float().isnan().any()
    assert_same(want, cast_ref(cumm.matmul(a, b, out=torch.empty(M, N, device="cuda"), **kw), None, E4))
    odd, pitched = _poisoned((M, N + 5), E4), _poisoned((M, 144), E4)
    off = _poisoned((M * N + 1,), E4)[1:].view(M, N)
    tr = _poisoned((N, M), E4).t()
    for out in (odd[:, :N], off, tr, pitched[:, :N]):
        got = cumm.matmul(a, b, out=out, **kw)
        torch.cuda.synchronize()
        assert got is out
        assert_same(out, want, f"strides {out.stride()} offset {out.storage_offset()}")
    for base in (odd, pitched):
        assert (base[:, N:].view(torch.uint8) == 0xFF).all()


def test_fp8_c_glu():
    """glu= into an FP8 C: with relu the cast of the same call's float32 C (the same math); with silu against
    float64 beside torch's eager silu(x @ w1) * (x @ w3) cast the same way (an FP8 C takes the activations' forms
    of the kernel's 16-bit C type, bfloat16's one-MUFU silu here: a float32 C's differ near zero)."""
    x = torch.randn(200, 256, device="cuda", dtype=torch.bfloat16)
    w1, w3 = (torch.randn(256, 96, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    w = cumm.glu_weight(w1, w3)
    v = cumm.matmul(x, w, glu="relu", out=torch.empty(200, 96, device="cuda"))
    s = _scale(v, E5, 0.5)
    c = cumm.matmul(x, w, glu="relu", out=_poisoned((200, 96), E5), scale_result=s)
    torch.cuda.synchronize()
    assert_same(c, cast_ref(v, s, E5), "glu relu")
    x64 = x.double()
    ref = torch.nn.functional.silu(x64 @ w1.double()) * (x64 @ w3.double())
    s = _scale(ref, E4, 0.5)
    c = cumm.matmul(x, w, glu="silu", out=_poisoned((200, 96), E4), scale_result=s)
    t = cast_ref((torch.nn.functional.silu(x @ w1) * (x @ w3)).float(), s, E4)
    ours, theirs = _rel(c.double() / s.double(), ref), _rel(t.double() / s.double(), ref)
    assert ours <= 1.05 * theirs + 1e-6, (ours, theirs)


def test_fp8_c_errors():
    a = torch.randn(33, 40, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(40, 24, device="cuda", dtype=torch.bfloat16)
    c8 = _poisoned((33, 24), E4)
    one = torch.ones((), device="cuda")
    with pytest.raises(ValueError, match=r"beta=1.0 with an FP8 out"):
        cumm.matmul(a, b, out=c8, beta=1.0)
    with pytest.raises(TypeError, match=r"a and b are float32"):
        cumm.matmul(a.float(), b.float(), out=c8)
    with pytest.raises(TypeError, match=r"scale_result scales an FP8 C"):
        cumm.matmul(a, b, scale_result=one)
    with pytest.raises(TypeError, match=r"scale_result scales an FP8 C"):
        cumm.matmul(a, b, out=torch.empty(33, 24, device="cuda", dtype=torch.bfloat16), scale_result=one)
    with pytest.raises(TypeError, match=r"float32 tensor of one element.*float16"):
        cumm.matmul(a, b, out=c8, scale_result=one.half())
    with pytest.raises(TypeError, match=r"one element.*\(2,\)"):
        cumm.matmul(a, b, out=c8, scale_result=torch.ones(2, device="cuda"))
    with pytest.raises(ValueError, match=r"split_k=2 with an epilogue"):
        cumm.matmul(a, b, out=c8, split_k=2)
    with pytest.raises(ValueError, match=r"out has shape|needs \(33, 24\)"):
        cumm.matmul(a, b, out=_poisoned((33, 25), E4))


def test_out_dtype():
    """out_dtype= makes C: an FP8 C equal to the out= call's, a float32 C of bfloat16 inputs equal to the out= float32
    call's, batches, glu= (half the columns), a CuPy product's float32 C; FP8 for CuPy arrays refused."""
    import cupy

    a = torch.randn(129, 200, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(200, 272, device="cuda", dtype=torch.bfloat16)
    s = torch.full((), 0.25, device="cuda")
    c = cumm.matmul(a, b, out_dtype=E4, scale_result=s)
    assert c.dtype == E4 and c.shape == (129, 272)
    assert_same(c, cumm.matmul(a, b, out=_poisoned((129, 272), E4), scale_result=s))
    c32 = cumm.matmul(a, b, out_dtype=torch.float32)
    assert c32.dtype == torch.float32 and torch.equal(c32, cumm.matmul(a, b, out=torch.empty(129, 272, device="cuda")))
    a3 = torch.randn(3, 65, 200, device="cuda", dtype=torch.bfloat16)
    c3 = cumm.matmul(a3, b, out_dtype=E5)
    assert c3.shape == (3, 65, 272) and c3.dtype == E5
    assert_same(c3, cast_ref(cumm.matmul(a3, b, out_dtype="float32"), None, E5))
    w = cumm.glu_weight(b[:, :96], b[:, 96:192])
    g = cumm.matmul(a, w, glu="silu", out_dtype=E4)
    assert g.shape == (129, 96) and g.dtype == E4
    ac = cupy.random.standard_normal((65, 64), dtype="float32").astype("float16")
    bc = cupy.random.standard_normal((64, 40), dtype="float32").astype("float16")
    cc = cumm.matmul(ac, bc, out_dtype="float32")
    assert type(cc) is cupy.ndarray and cc.dtype == cupy.float32
    assert bool((cc == cumm.matmul(ac, bc, out=cupy.empty((65, 40), "float32"))).all())
    with pytest.raises(TypeError, match="CuPy has no FP8 dtype"):
        cumm.matmul(ac, bc, out_dtype=E4)


def test_torch_linear_fp8():
    """cumm.torch.linear with an FP8 out_dtype (torch.ops.cumm.linear_fp8): the bytes of cumm.matmul's FP8 C, under
    torch.compile(fullgraph=True) too; K = 0 (no kernel: torch's saturating cast of act(bias)); its checks."""
    import cumm.torch as ct

    x = torch.randn(2, 65, 256, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(264, 256, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(264, device="cuda", dtype=torch.bfloat16)
    s = torch.full((), 0.5, device="cuda")
    y = ct.linear(x, w, b, "gelu_tanh", out_dtype=E4, scale_result=s)
    assert y.dtype == E4 and y.shape == (2, 65, 264)
    kw = dict(bias=b, activation="gelu_tanh", out_dtype=E4, scale_result=s)
    want = cumm.matmul(x.reshape(130, 256), w.t(), **kw).reshape(2, 65, 264)
    assert_same(y, want)
    f = torch.compile(lambda x: ct.linear(x, w, b, "gelu_tanh", out_dtype=E4, scale_result=s), fullgraph=True)
    assert_same(f(x), want)
    z = ct.linear(x[..., :0], w[:, :0], b, "relu", out_dtype=E5)
    assert_same(z, cast_ref(torch.relu(b.float()).expand(2, 65, 264), None, E5))
    with pytest.raises(RuntimeError, match="out_dtype must be torch.float8_e4m3fn or float8_e5m2"):
        ct.linear(x, w, out_dtype=torch.int8)
    with pytest.raises(RuntimeError, match="scale_result must be a float32 tensor of one element"):
        ct.linear(x, w, out_dtype=E4, scale_result=torch.ones(2, device="cuda"))
