"""Arrays of other libraries in, the same kind out (torch, __cuda_array_interface__, DLPack); the cached call path."""

from __future__ import annotations

import math

import pytest

import cumm

from .conftest import rel_err

TOL = 1e-5
gpu = pytest.mark.gpu


def _torch():
    return pytest.importorskip("torch", reason="torch is not installed (optional: the interop tests need it)")


def _ref64(a, b):
    import cupy

    a64, b64 = cupy.asarray(a).astype(cupy.float64), cupy.asarray(b).astype(cupy.float64)
    return a64 @ b64


@gpu
@pytest.mark.parametrize("kernel", ["auto", "warptile", "tf32x3", "naive"])
def test_torch_in_torch_out(kernel):
    torch = _torch()
    g = torch.Generator(device="cuda").manual_seed(7)
    a = torch.randn(131, 97, device="cuda", generator=g)
    b = torch.randn(97, 67, device="cuda", generator=g)
    c = cumm.matmul(a, b, kernel=kernel)
    assert isinstance(c, torch.Tensor) and c.is_cuda and c.dtype == torch.float32 and c.shape == (131, 67)
    assert c.device == a.device
    assert rel_err(c, _ref64(a, b)) < TOL
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False  # torch.matmul in true FP32
    try:
        ref = torch.matmul(a, b)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev
    assert float((c - ref).norm() / ref.norm()) < 1e-5


@gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("kernel", ["auto", "wgmma_ws", "mma"])
def test_torch_half_tensors(kernel, dtype):
    """torch float16 / bfloat16 tensors in (torch hands bfloat16 to __cuda_array_interface__ as opaque 2-byte
    items), a tensor of that dtype out, out= a float32 tensor; error no worse than 1.5x torch.matmul's own."""
    torch = _torch()
    if kernel == "wgmma_ws" and torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("wgmma_ws needs sm_90")
    tdt = getattr(torch, dtype)
    g = torch.Generator(device="cuda").manual_seed(5)
    a = torch.randn(257, 263, device="cuda", generator=g).to(tdt)
    b = torch.randn(263, 136, device="cuda", generator=g).to(tdt)
    ref = _ref64(a.float(), b.float())
    theirs = rel_err(torch.matmul(a, b).float(), ref)
    c = cumm.matmul(a, b, kernel=kernel)
    assert isinstance(c, torch.Tensor) and c.dtype == tdt and c.shape == (257, 136)
    assert rel_err(c.float(), ref) <= 1.5 * theirs
    out = torch.full((257, 136), math.nan, device="cuda")
    assert cumm.matmul(a, b, kernel=kernel, out=out) is out
    assert rel_err(out, ref) < 1e-5  # float32 out: the accumulator, not rounded to the inputs' dtype


@gpu
@pytest.mark.filterwarnings("error::DeprecationWarning")  # CuPy 14 deprecates cupy.cuda.ExternalStream
def test_torch_views_out_and_streams():
    """Transposed and sliced views, out= a torch tensor (returned), alpha/beta, a non-default torch stream (the
    copy of b is queued on it through cupy)."""
    torch = _torch()
    g = torch.Generator(device="cuda").manual_seed(11)
    big = torch.randn(300, 200, device="cuda", generator=g)
    a = big[5:136, 3:100]  # strided rows
    b = torch.randn(67, 97, device="cuda", generator=g).t()  # not row-major: copied
    out = torch.full((131, 67), math.nan, device="cuda")
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        got = cumm.matmul(a, b, out=out)
        again = cumm.matmul(a, b, out=out, alpha=2.0, beta=-1.0)  # out = 2 ab - ab = ab
    side.synchronize()
    assert got is out and again is out
    assert rel_err(out, _ref64(a, b)) < TOL


@gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_torch_transformer_products(dtype):
    """What a transformer hands over, on a non-default torch stream: attention's q @ k.transpose(-1, -2) (4-D, a
    batch of column-major k), a linear layer's x @ w.t() (read in place on sm_90), and x @ wt whose rows of 5003
    halves are off 16 bytes (copied for the copy engine on that stream); each within 1.5x torch's own error."""
    torch = _torch()
    tdt = getattr(torch, dtype)
    g = torch.Generator(device="cuda").manual_seed(13)

    def randn(*shape):
        return torch.randn(*shape, device="cuda", generator=g).to(tdt)

    q, k = randn(2, 4, 128, 64), randn(2, 4, 136, 64)
    x, w, wt = randn(2048, 512), randn(5003, 512), randn(512, 5003)
    cases = [(q, k.transpose(-1, -2)), (x, w.t()), (x, wt)]
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        got = [cumm.matmul(a, b) for a, b in cases]
    side.synchronize()
    for (a, b), c in zip(cases, got, strict=True):
        assert isinstance(c, torch.Tensor) and c.dtype == tdt and c.shape == torch.matmul(a, b).shape
        ref = _ref64(a.float(), b.float())
        theirs = rel_err(torch.matmul(a, b).float(), ref)
        assert rel_err(c.float(), ref) <= 1.5 * theirs, (a.shape, b.shape)


@gpu
def test_cached_calls_use_new_pointers(rng):
    """The second call with a key takes the cached path: it must read the new arrays and write the new out."""
    import cupy

    for _ in range(3):
        a = rng.standard_normal((70, 50), dtype=cupy.float32)
        b = rng.standard_normal((50, 30), dtype=cupy.float32)
        out = cupy.full((70, 30), math.nan, dtype=cupy.float32)
        assert cumm.matmul(a, b, out=out) is out
        assert rel_err(out, _ref64(a, b)) < TOL
        c = cumm.matmul(a, b)
        assert rel_err(c, _ref64(a, b)) < TOL


@gpu
def test_cached_call_still_refuses_overlap(rng):
    import cupy

    a = rng.standard_normal((64, 64), dtype=cupy.float32)
    b = rng.standard_normal((64, 64), dtype=cupy.float32)
    out = cupy.empty((64, 64), dtype=cupy.float32)
    cumm.matmul(a, b, out=out)
    cumm.matmul(a, b, out=out)  # cached
    with pytest.raises(ValueError, match="out overlaps a"):
        cumm.matmul(out, b, out=out)  # same key as above, but out is a
    x = rng.standard_normal((64, 64), dtype=cupy.float32)
    with pytest.raises(ValueError, match="out overlaps b"):
        cumm.matmul(a, x, out=x)


@gpu
def test_cuda_array_interface_object(rng):
    """Any object with __cuda_array_interface__ (here a bare holder of a cupy array's interface)."""
    import cupy

    class Holder:
        def __init__(self, x):
            self._x = x
            self.__cuda_array_interface__ = x.__cuda_array_interface__

    a = rng.standard_normal((33, 17), dtype=cupy.float32)
    b = rng.standard_normal((17, 9), dtype=cupy.float32)
    c = cumm.matmul(Holder(a), Holder(b))
    assert isinstance(c, cupy.ndarray) and rel_err(c, _ref64(a, b)) < TOL


@gpu
def test_mixed_kinds_are_refused(rng):
    torch = _torch()
    import cupy

    a = rng.standard_normal((8, 8), dtype=cupy.float32)
    t = torch.ones((8, 8), device="cuda")
    with pytest.raises(TypeError, match=r"a is a cupy\.ndarray but b is a torch\.Tensor"):
        cumm.matmul(a, t)
    with pytest.raises(TypeError, match=r"but out is a torch\.Tensor"):
        cumm.matmul(a, a, out=t)


def test_cpu_torch_tensor_is_refused():
    torch = _torch()
    with pytest.raises(TypeError, match=r"a must be a GPU array, got a torch tensor on the cpu: pass a\.cuda\(\)"):
        cumm.matmul(torch.ones((2, 2)), torch.ones((2, 2)))
