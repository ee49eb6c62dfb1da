"""cumm.grouped_matmul (mixture-of-experts products in one launch) and its kernel, wgmma_grouped.

CPU: the errors that need no GPU array, the host offsets' checks, offline NVRTC compiles of every variant for
sm_90a without spills. GPU (sm_90a): every layout against float64 per group into NaN-poisoned outputs, empty and
1-row groups, random offsets, odd K and N, device against host offsets, bad device offsets clamped, every bad
input, torch tensors, CUDA-graph capture of the masked layout replayed on new counts."""

from __future__ import annotations

import math

import numpy as np
import pytest

import cumm
from cumm.api.grouped import _host_offsets
from cumm.core.dtypes import TOLERANCE
from cumm.ladder import get_spec
from cumm.runtime.compile import compile_offline
from cumm.runtime.render import TRANSPOSED_B, dtype_flag

gpu = pytest.mark.gpu
HALVES = ("float16", "bfloat16")

# ---------------------------------------------------------------------------------------------------------------
# CPU
# ---------------------------------------------------------------------------------------------------------------


def test_grouped_is_public_and_its_kernel_a_grouped_kind():
    assert "grouped_matmul" in cumm.__all__
    assert cumm.kernels("grouped") == ["wgmma_grouped"]
    assert "wgmma_grouped" not in cumm.kernels()  # never a matmul rung
    spec = cumm.kernel_spec("wgmma_grouped")
    assert spec.kind == "grouped" and spec.template == "grouped/wgmma_grouped/kernel.cu"


@pytest.mark.parametrize("masked", [0, 1])
@pytest.mark.parametrize("layout", [0, TRANSPOSED_B])
@pytest.mark.parametrize("dtype", HALVES)
def test_offline_compile_without_spills(masked, layout, dtype):
    spec = get_spec("wgmma_grouped")
    for cfg in (
        spec.resolve({"MASKED": masked}, 90),
        spec.resolve({**spec.configs["narrow"], "MASKED": masked}, 90),
        spec.resolve({"MASKED": masked, "EPI": 0}, 90),
        spec.resolve({"MASKED": masked, "STAGES": 3}, 90),
    ):
        for vec_c in (0, 1):
            k = compile_offline(spec, cfg, "sm_90", (1, 1, vec_c, 0, dtype_flag(dtype, dtype), layout))
            assert k.arch == "sm_90a" and k.spill_bytes == 0 and k.stack_bytes == 0, (cfg, k.log)
            assert k.shared_bytes <= 232448
    with pytest.raises(cumm.ConfigError, match="compute capability 9.0"):
        compile_offline(spec, spec.resolve(None), "sm_80")


def test_config_constraints():
    spec = get_spec("wgmma_grouped")
    with pytest.raises(cumm.ConfigError, match="MASKED is 0"):
        spec.resolve({"MASKED": 2})
    with pytest.raises(cumm.ConfigError, match="spill"):
        spec.resolve({"BN": 256, "WGS": 1, "NUM_THREADS": 256, "BM": 128})
    with pytest.raises(cumm.ConfigError, match="227 KB"):
        spec.resolve({"STAGES": 5})
    with pytest.raises(cumm.ConfigError, match="set SK = 0 for WGS = 1"):
        spec.resolve({"BN": 128, "WGS": 1, "NUM_THREADS": 256})
    assert spec.resolve({"BN": 128, "WGS": 1, "NUM_THREADS": 256, "SK": 0})["SK"] == 0
    with pytest.raises(cumm.ConfigError, match="SKMIN"):
        spec.resolve({"SKMIN": 0})


def test_scratch_is_null_in_a_capture_without_a_buffer(monkeypatch):
    """A stream being captured into a CUDA graph gets no new scratch buffer (making one syncs the device): 0, which
    the stream-K kernels (wgmma_ws, wgmma_grouped) read as whole tiles; no GPU is touched on that path."""
    import cupy

    from cumm.runtime import scratch

    monkeypatch.setattr(scratch, "_buffers", {})
    monkeypatch.setattr(cupy.cuda.runtime, "streamIsCapturing", lambda s: True)
    assert scratch.pointer(0, 12345, 1 << 20) == 0


def test_stream_k_flags_are_one_layout():
    """wgmma_ws and wgmma_grouped share a stream's scratch buffer: both kernels put SK_FLAGS flags at its start."""
    from cumm.ladder.common import SK_FLAGS
    from cumm.runtime.render import template_text

    for k in ("wgmma_ws", "wgmma_grouped"):
        assert f"#define CUMM_SK_FLAGS {SK_FLAGS}" in template_text(get_spec(k).template), k


def test_stream_k_workspace():
    """The host sizes the workspace for the grid; the kernel decides from the device's tile count whether to use it."""
    from cumm.ladder import rung_module

    spec, mod = get_spec("wgmma_grouped"), rung_module("wgmma_grouped")
    cfg = spec.resolve(None, 90)
    assert cfg["SK"] > 0 and mod.workspace(cfg, 132) == 4096 * 4 + 132 * 128 * 256 * 4
    assert mod.workspace(spec.resolve({"SK": 0}, 90), 132) == 0
    assert mod.workspace(cfg, 5000) == 0  # more blocks than flags: whole tiles
    for vec_c in (0, 1):  # stream-K compiled in: no spills in the producer's 40 registers or the consumers'
        k = compile_offline(spec, cfg, "sm_90", (1, 1, vec_c, 0, dtype_flag("bfloat16", "bfloat16"), TRANSPOSED_B))
        assert k.spill_bytes == 0 and k.stack_bytes == 0, k.log


class _FakeOut:
    """What the plan reads of an out array: its dtype, strides and address."""

    def __init__(self, shape, ptr=0, strides=None):
        self.dtype = np.dtype("float16")
        self.shape = shape
        self.strides = strides or tuple(int(np.prod(shape[i + 1 :])) * 2 for i in range(len(shape)))
        self.data = type("Mem", (), {"ptr": ptr})()


def test_plan_epilogue_and_stages():
    from cumm.plan import grouped as plan

    out = _FakeOut((1000, 512), ptr=4096)
    cfg = plan.configure(plan.CONTIGUOUS, 64, 1000, out, None)
    assert cfg["EPI"] == 1 and cfg["STAGES"] == 4 and cfg["MASKED"] == 0
    assert plan.configure(plan.CONTIGUOUS, 246, 1000, out, None)["STAGES"] == 4
    assert plan.configure(plan.CONTIGUOUS, 247, 1000, out, None)["STAGES"] == 3
    assert plan.configure(plan.CONTIGUOUS, 1024, 1000, out, None)["STAGES"] == 3
    assert plan.configure(plan.CONTIGUOUS, 1024, 1000, out, {"EPI": 0})["STAGES"] == 4
    with pytest.raises(ValueError, match=r"table of 246 groups, not G = 300"):
        plan.configure(plan.CONTIGUOUS, 300, 1000, out, {"STAGES": 4})
    off = _FakeOut((1000, 512), ptr=4098)  # 2 bytes off 16
    assert plan.configure(plan.CONTIGUOUS, 8, 1000, off, None)["EPI"] == 0
    with pytest.raises(ValueError, match="16-byte aligned"):
        plan.configure(plan.CONTIGUOUS, 8, 1000, off, {"EPI": 1})
    pitch = _FakeOut((1000, 500), ptr=4096, strides=(1004, 2))  # a row pitch of 502 halves
    assert plan.configure(plan.CONTIGUOUS, 8, 1000, pitch, None)["EPI"] == 0
    with pytest.raises(ValueError, match="MASKED is set by the layout"):
        plan.configure(plan.CONTIGUOUS, 8, 1000, out, {"MASKED": 1})


def test_plan_masked_epilogue_needs_groups_whole_rows_apart():
    from cumm.plan import grouped as plan

    dense = _FakeOut((4, 100, 256), ptr=4096)
    assert plan.configure(plan.MASKED, 4, 100, dense, None)["EPI"] == 1
    assert plan.c_rows(True, 4, 100, dense) == 400
    wider = _FakeOut((4, 100, 256), ptr=4096, strides=(130 * 512, 512, 2))  # groups 130 rows apart
    assert plan.configure(plan.MASKED, 4, 100, wider, None)["EPI"] == 1
    assert plan.c_rows(True, 4, 100, wider) == 3 * 130 + 100
    odd = _FakeOut((4, 100, 256), ptr=4096, strides=(100 * 512 + 16, 512, 2))  # off a whole row
    assert plan.configure(plan.MASKED, 4, 100, odd, None)["EPI"] == 0
    overlap = _FakeOut((4, 100, 256), ptr=4096, strides=(50 * 512, 512, 2))  # groups overlapping
    assert plan.configure(plan.MASKED, 4, 100, overlap, None)["EPI"] == 0


CPU_CASES = [
    ("neither", lambda: cumm.grouped_matmul(None, None), TypeError, r"exactly one of offs= .* and masked_m="),
    ("both", lambda: cumm.grouped_matmul(None, None, [1], masked_m=[1]), TypeError, r"exactly one of offs="),
    ("host-a", lambda: cumm.grouped_matmul(np.ones((4, 8)), None, [4]), TypeError, r"a must be a GPU array"),
    ("list-a", lambda: cumm.grouped_matmul([[1.0]], None, [1]), TypeError, r"a must be a GPU array"),
]


@pytest.mark.parametrize("case", CPU_CASES, ids=[c[0] for c in CPU_CASES])
def test_cpu_errors(case):
    _, call, exc, pattern = case
    with pytest.raises(exc, match=pattern):
        call()


def test_host_offsets_checked():
    assert _host_offsets([0, 3, 3, 10], 4, 10).tolist() == [0, 3, 3, 10]
    assert _host_offsets((2, 5), 2, 9).dtype == np.int32
    with pytest.raises(ValueError, match=r"must not decrease.*offs\[2\] = 1 < offs\[1\] = 3"):
        _host_offsets([2, 3, 1], 3, 10)
    with pytest.raises(ValueError, match=r"must not decrease.*offs\[0\] = -1 < 0"):
        _host_offsets([-1, 3], 2, 10)
    with pytest.raises(ValueError, match=r"offs\[-1\] = 11 is past the end of a, which has 10 rows"):
        _host_offsets([3, 11], 2, 10)
    with pytest.raises(ValueError, match=r"one cumulative row end per group: b has 3 groups, offs has 2"):
        _host_offsets([3, 4], 3, 10)
    with pytest.raises(TypeError, match=r"offs\[1\] must be an int"):
        _host_offsets([3, 4.5], 2, 10)


# ---------------------------------------------------------------------------------------------------------------
# GPU
# ---------------------------------------------------------------------------------------------------------------


def _rel(got, ref) -> float:
    import cupy

    g = got.astype(cupy.float64)
    den = float(cupy.linalg.norm(ref))
    return float(cupy.linalg.norm(g - ref)) / (den if den else 1.0)


def _weights(rng, G, K, N, dtype, transposed):
    import cupy

    if transposed:  # (G, N, K) weights as models store them, passed as their (G, K, N) view
        return rng.standard_normal((G, N, K), dtype=cupy.float32).astype(dtype).transpose(0, 2, 1)
    return rng.standard_normal((G, K, N), dtype=cupy.float32).astype(dtype)


def _check_contiguous(a, b, ends, out, dtype):
    """Each group against float64; rows past ends[-1] still NaN (never written)."""
    import cupy

    start = 0
    for g, end in enumerate(ends):
        if end > start:
            ref = a[start:end].astype(cupy.float64) @ b[g].astype(cupy.float64)
            got = out[start:end]
            assert not bool(cupy.isnan(got.astype(cupy.float32)).any()), f"group {g}: rows left unwritten"
            assert _rel(got, ref) < TOLERANCE[dtype], f"group {g} rows {start}:{end}"
        start = end
    rest = out[ends[-1] :].astype(cupy.float32) if len(ends) else out
    assert bool(cupy.isnan(rest).all()), "rows past offs[-1] were written"


def _nan(shape, dtype):
    import cupy

    return cupy.full(shape, math.nan, dtype=dtype)


def _random_ends(rs, G, T, empty=0.2):
    sizes = rs.multinomial(T, np.ones(G) / G)
    sizes[rs.random(G) < empty] = 0
    return np.cumsum(sizes).tolist()


@gpu
@pytest.mark.parametrize("dtype", HALVES)
@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize(
    "G,T,K,N",
    [
        (4, 1000, 256, 512),
        (8, 3000, 512, 384),
        (3, 7, 64, 64),
        (5, 513, 4104, 520),
        (2, 300, 1, 256),
        (6, 777, 72, 136),
    ],
)
def test_contiguous_random_offsets(sm90, rng, dtype, transposed, G, T, K, N):
    import cupy

    rs = np.random.default_rng(G * T + K)
    a = rng.standard_normal((T, K), dtype=cupy.float32).astype(dtype)
    b = _weights(rng, G, K, N, dtype, transposed)
    ends = _random_ends(rs, G, T)
    for offs in (ends, cupy.asarray(ends, dtype=cupy.int32)):
        out = _nan((T, N), dtype)
        assert cumm.grouped_matmul(a, b, offs, out=out) is out
        _check_contiguous(a, b, ends, out, dtype)


@gpu
@pytest.mark.parametrize("dtype", HALVES)
def test_contiguous_empty_one_row_and_short_groups(sm90, rng, dtype):
    import cupy

    G, K, N = 7, 384, 256
    sizes = [0, 1, 0, 129, 1, 0, 255]  # empty groups first and between, 1-row groups, tiles one row past 128
    ends = np.cumsum(sizes).tolist()
    T = ends[-1] + 5  # rows past the last group: never written
    a = rng.standard_normal((T, K), dtype=cupy.float32).astype(dtype)
    b = _weights(rng, G, K, N, dtype, False)
    out = _nan((T, N), dtype)
    cumm.grouped_matmul(a, b, cupy.asarray(ends, dtype=cupy.int32), out=out)
    _check_contiguous(a, b, ends, out, dtype)
    all_empty = _nan((T, N), dtype)
    cumm.grouped_matmul(a, b, [0] * G, out=all_empty)
    assert bool(cupy.isnan(all_empty.astype(cupy.float32)).all())


@gpu
def test_contiguous_new_result_and_odd_shapes_through_padding(sm90, rng):
    import cupy

    dtype = "bfloat16"
    for T, K, N in ((31, 7, 5), (64, 13, 1), (1, 1, 1), (129, 1001, 257)):
        G = 3
        a = rng.standard_normal((T, K), dtype=cupy.float32).astype(dtype)
        b = _weights(rng, G, K, N, dtype, False)
        ends = [T // 3, T // 3, T]
        out = cumm.grouped_matmul(a, b, ends)
        assert out.shape == (T, N) and out.dtype == a.dtype
        _check_contiguous(a, b, ends, out, dtype)
        # a view with a row pitch off 16 bytes, and transposed weights with K off 8
        wide = rng.standard_normal((T, K + 3), dtype=cupy.float32).astype(dtype)[:, :K]
        bt = _weights(rng, G, K, N, dtype, True)
        out = _nan((T, N), dtype)
        cumm.grouped_matmul(wide, bt, ends, out=out)
        _check_contiguous(wide, bt, ends, out, dtype)


@gpu
@pytest.mark.parametrize("epi", [0, 1])
@pytest.mark.parametrize("masked", [False, True])
def test_stream_k_tail_against_whole_tiles(sm90, rng, epi, masked):
    """Stream-K (SK > 0, the default): fewer tiles than blocks, every tile's k-slabs shared out (odd K: a last
    partial slab); and a tail behind a whole round (SKMIN = 1 so that a short K takes it), group ends inside
    tiles. Each against float64 and against SK = 0 (whole tiles) on the same inputs; run twice, so the flags
    the first launch left (lowered) serve the second."""
    import cupy

    dtype = "bfloat16"
    sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
    N = 296  # two column tiles of 256, the second a 40-column edge (a row pitch the TMA store takes)
    # 8 tiles; then 2 (38 + sms / 2 - 29 + 1) = sms + 20 tiles (132 multiprocessors: a last round 15 % full)
    cases = [([100, 1, 250], 1000), ([0, 37 * 128 + 5, (sms // 2 - 29) * 128 - 77, 1], 200)]
    for sizes, K in cases:
        G = len(sizes)
        b = _weights(rng, G, K, N, dtype, True)
        if masked:
            max_m = max(sizes)
            a = rng.standard_normal((G, max_m, K), dtype=cupy.float32).astype(dtype)
            counts = cupy.asarray(sizes, dtype=cupy.int32)
        else:
            T = sum(sizes) + 3
            a = rng.standard_normal((T, K), dtype=cupy.float32).astype(dtype)
            ends = np.cumsum(sizes).tolist()
        ref = None
        for sk in (4, 4, 0):
            config = {"EPI": epi, "SK": sk, "SKMIN": 1}
            if masked:
                out = _nan((G, max_m, N), dtype)
                cumm.grouped_matmul(a, b, masked_m=counts, out=out, config=config)
                for g, m in enumerate(sizes):
                    if m:
                        r64 = a[g, :m].astype(cupy.float64) @ b[g].astype(cupy.float64)
                        assert _rel(out[g, :m], r64) < TOLERANCE[dtype], (sizes, g, sk)
                    assert bool(cupy.isnan(out[g, m:].astype(cupy.float32)).all()), (sizes, g, "rows past m")
            else:
                out = _nan((T, N), dtype)
                cumm.grouped_matmul(a, b, cupy.asarray(ends, dtype=cupy.int32), out=out, config=config)
                _check_contiguous(a, b, ends, out, dtype)
            got = out.astype(cupy.float32)
            if ref is None:
                ref = got
            else:  # stream-K sums the slabs in another order: equal to whole tiles within C's rounding
                both = ~cupy.isnan(ref)
                assert bool((cupy.isnan(got) == ~both).all())
                diff = cupy.abs(got - ref)[both]
                assert float(diff.max()) <= 0.02 * float(cupy.abs(ref[both]).max()), (sizes, sk)


@gpu
def test_bad_device_offsets_are_clamped(sm90, rng):
    """Decreasing, negative and past-the-end device offsets: no access out of bounds, groups clamped to
    [previous end, T] (what the docstring promises)."""
    import cupy

    T, K, N, G = 200, 128, 128, 5
    a = rng.standard_normal((T, K), dtype=cupy.float32).astype("float16")
    b = _weights(rng, G, K, N, "float16", False)
    raw = [50, 20, -7, 150, 10**9]
    clamped = [50, 50, 50, 150, 200]
    out = _nan((T, N), "float16")
    cumm.grouped_matmul(a, b, cupy.asarray(raw, dtype=cupy.int32), out=out)
    cupy.cuda.get_current_stream().synchronize()
    _check_contiguous(a, b, clamped, out, "float16")


@gpu
@pytest.mark.parametrize("dtype", HALVES)
@pytest.mark.parametrize("transposed", [False, True])
def test_masked(sm90, rng, dtype, transposed):
    import cupy

    G, max_m, K, N = 6, 300, 520, 384
    a = rng.standard_normal((G, max_m, K), dtype=cupy.float32).astype(dtype)
    b = _weights(rng, G, K, N, dtype, transposed)
    counts = [0, 1, 300, 129, 64, 257]
    for mm in (counts, cupy.asarray(counts, dtype=cupy.int32), cupy.asarray([5, -3, 999, 0, 1, 128], cupy.int32)):
        want = [5, 0, 300, 0, 1, 128] if isinstance(mm, cupy.ndarray) and int(mm[1]) == -3 else counts
        sentinel = rng.standard_normal((G, max_m, N), dtype=cupy.float32).astype(dtype)
        out = sentinel.copy()
        cumm.grouped_matmul(a, b, masked_m=mm, out=out)
        for g, m in enumerate(want):
            if m:
                ref = a[g, :m].astype(cupy.float64) @ b[g].astype(cupy.float64)
                assert _rel(out[g, :m], ref) < TOLERANCE[dtype], f"group {g}"
            assert bool((out[g, m:] == sentinel[g, m:]).all()), f"group {g}: rows past masked_m written"


@gpu
def test_torch_tensors_and_torch_grouped_mm_layouts(sm90):
    torch = pytest.importorskip("torch")
    G, K, N = 8, 512, 1024
    sizes = torch.tensor([0, 100, 1, 500, 128, 0, 77, 300])
    offs = torch.cumsum(sizes, 0).to(torch.int32).cuda()
    T = int(sizes.sum())
    a = torch.randn(T, K, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(G, N, K, device="cuda", dtype=torch.bfloat16)  # the weights as models store them
    out = cumm.grouped_matmul(a, w.transpose(1, 2), offs)
    assert isinstance(out, torch.Tensor) and out.shape == (T, N) and out.dtype == torch.bfloat16
    ref = torch._grouped_mm(a, w.transpose(1, 2), offs=offs)
    start = 0
    for g, end in enumerate(offs.tolist()):
        if end > start:
            r64 = a[start:end].double() @ w[g].double().T
            ours = (out[start:end].double() - r64).norm() / r64.norm()
            theirs = (ref[start:end].double() - r64).norm() / r64.norm()
            assert ours <= 1.5 * theirs + 1e-3, (g, float(ours), float(theirs))
        start = end


@gpu
def test_masked_cuda_graph_replayed_on_new_counts(sm90):
    torch = pytest.importorskip("torch")
    G, max_m, K, N = 8, 256, 384, 512
    a = torch.randn(G, max_m, K, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(G, N, K, device="cuda", dtype=torch.bfloat16)
    counts = torch.zeros(G, dtype=torch.int32, device="cuda")
    out = torch.full((G, max_m, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    cumm.grouped_matmul(a, w.transpose(1, 2), masked_m=counts, out=out)  # compile and make the maps first
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        cumm.grouped_matmul(a, w.transpose(1, 2), masked_m=counts, out=out)
    gen = torch.Generator().manual_seed(5)
    for _ in range(3):
        new = torch.randint(0, max_m + 1, (G,), generator=gen, dtype=torch.int32)
        new[0] = 0
        counts.copy_(new)
        a.normal_()
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        for g, m in enumerate(new.tolist()):
            if m:
                r64 = a[g, :m].double() @ w[g].double().T
                assert float((out[g, :m].double() - r64).norm() / r64.norm()) < TOLERANCE["bfloat16"]
            assert bool(out[g, m:].isnan().all()), f"group {g}: rows past masked_m written"


@gpu
@pytest.mark.parametrize("epi", [None, 0, 1])
@pytest.mark.parametrize("transposed", [False, True])
def test_epilogue_group_ends_at_every_offset_of_a_tile(sm90, rng, epi, transposed):
    """The TMA-store epilogue (EPI = 1) and the direct stores (EPI = 0): group ends at, before and past each 64-row
    block of a tile (blocks wholly inside go through C's map, crossing ones through the clip map), 1-row and
    empty groups; rows past offs[-1] never written."""
    import cupy

    dtype = "bfloat16"
    sizes = [127, 128, 129, 63, 64, 65, 1, 0, 255, 256, 257, 191, 193, 2, 0, 130]
    G, K, N = len(sizes), 192, 320
    ends = np.cumsum(sizes).tolist()
    T = ends[-1] + 70
    a = rng.standard_normal((T, K), dtype=cupy.float32).astype(dtype)
    b = _weights(rng, G, K, N, dtype, transposed)
    out = _nan((T, N), dtype)
    config = None if epi is None else {"EPI": epi}
    cumm.grouped_matmul(a, b, cupy.asarray(ends, dtype=cupy.int32), out=out, config=config)
    _check_contiguous(a, b, ends, out, dtype)


@gpu
@pytest.mark.parametrize("epi", [0, 1])
def test_masked_epilogue_in_a_wider_buffer(sm90, rng, epi):
    """Masked, out a (G, max_m, N) view of a (G, max_m + 37, N) buffer (groups whole rows apart: the epilogue's
    maps see them as one column): rows past each count, and the buffer's rows between groups, untouched."""
    import cupy

    dtype = "float16"
    G, max_m, K, N = 5, 200, 136, 256
    a = rng.standard_normal((G, max_m, K), dtype=cupy.float32).astype(dtype)
    b = _weights(rng, G, K, N, dtype, True)
    counts = [200, 0, 65, 129, 1]
    big = rng.standard_normal((G, max_m + 37, N), dtype=cupy.float32).astype(dtype)
    sentinel = big.copy()
    out = big[:, :max_m]
    cumm.grouped_matmul(a, b, masked_m=cupy.asarray(counts, dtype=cupy.int32), out=out, config={"EPI": epi})
    for g, m in enumerate(counts):
        if m:
            ref = a[g, :m].astype(cupy.float64) @ b[g].astype(cupy.float64)
            assert _rel(big[g, :m], ref) < TOLERANCE[dtype], f"group {g}"
        assert bool((big[g, m:] == sentinel[g, m:]).all()), f"group {g}: rows past masked_m written"


@gpu
@pytest.mark.parametrize("G", [247, 1024])
def test_many_groups_table_beside_three_stages(sm90, rng, G):
    """More groups than a 4-stage ring with the epilogue leaves table room for: the plan takes 3 stages."""
    import cupy

    dtype = "bfloat16"
    K, N = 64, 128
    rs = np.random.default_rng(G)
    T = 3 * G
    ends = _random_ends(rs, G, T, empty=0.3)
    a = rng.standard_normal((T, K), dtype=cupy.float32).astype(dtype)
    b = _weights(rng, G, K, N, dtype, False)
    out = _nan((T, N), dtype)
    cumm.grouped_matmul(a, b, cupy.asarray(ends, dtype=cupy.int32), out=out)
    _check_contiguous(a, b, ends, out, dtype)
    with pytest.raises(ValueError, match=r"table of 246 groups, not G = "):
        cumm.grouped_matmul(a, b, ends, out=out, config={"STAGES": 4})


@gpu
def test_unaligned_out_takes_direct_stores(sm90, rng):
    """An out view 2 bytes off 16: the plan picks EPI = 0; asking for EPI = 1 is refused, naming the rule."""
    import cupy

    dtype = "float16"
    G, T, K, N = 3, 300, 128, 256
    a = rng.standard_normal((T, K), dtype=cupy.float32).astype(dtype)
    b = _weights(rng, G, K, N, dtype, False)
    ends = [100, 100, 290]
    buf = _nan((T, N + 8), dtype)
    out = buf[:, 1 : N + 1]
    cumm.grouped_matmul(a, b, ends, out=out)
    _check_contiguous(a, b, ends, out, dtype)
    with pytest.raises(ValueError, match="16-byte aligned"):
        cumm.grouped_matmul(a, b, ends, out=out, config={"EPI": 1})


def _gpu_cases():
    import cupy

    def h(shape, dtype="bfloat16"):
        return cupy.ones(shape, dtype=dtype)

    i32 = cupy.int32
    return [
        (
            "float32",
            lambda: cumm.grouped_matmul(h((8, 16), "float32"), h((2, 16, 8), "float32"), [4, 8]),
            TypeError,
            r"a must be float16 or bfloat16",
        ),
        (
            "dtype-mismatch",
            lambda: cumm.grouped_matmul(h((8, 16)), h((2, 16, 8), "float16"), [4, 8]),
            TypeError,
            r"one dtype, got bfloat16 and float16",
        ),
        ("b-2d", lambda: cumm.grouped_matmul(h((8, 16)), h((16, 8)), [8]), ValueError, r"b must be 3-D"),
        (
            "a-3d-with-offs",
            lambda: cumm.grouped_matmul(h((2, 8, 16)), h((2, 16, 8)), [4, 8]),
            ValueError,
            r"a must be 2-D, \(total_tokens, K\) with offs",
        ),
        (
            "a-2d-masked",
            lambda: cumm.grouped_matmul(h((8, 16)), h((2, 16, 8)), masked_m=[1, 2]),
            ValueError,
            r"a must be 3-D, \(G, max_m, K\)",
        ),
        (
            "k-mismatch",
            lambda: cumm.grouped_matmul(h((8, 16)), h((2, 32, 8)), [4, 8]),
            ValueError,
            r"a's K \(16.*must match b's \(32",
        ),
        (
            "g-mismatch",
            lambda: cumm.grouped_matmul(h((3, 8, 16)), h((2, 16, 8)), masked_m=[1, 2]),
            ValueError,
            r"a has 3 groups and b 2",
        ),
        (
            "decreasing",
            lambda: cumm.grouped_matmul(h((8, 16)), h((2, 16, 8)), [6, 4]),
            ValueError,
            r"must not decrease",
        ),
        (
            "past-end",
            lambda: cumm.grouped_matmul(h((8, 16)), h((2, 16, 8)), [4, 9]),
            ValueError,
            r"past the end of a, which has 8 rows",
        ),
        (
            "offs-count",
            lambda: cumm.grouped_matmul(h((8, 16)), h((2, 16, 8)), [8]),
            ValueError,
            r"b has 2 groups, offs has 1",
        ),
        (
            "offs-int64",
            lambda: cumm.grouped_matmul(h((8, 16)), h((2, 16, 8)), cupy.asarray([4, 8])),
            TypeError,
            r"offs must be int32",
        ),
        (
            "offs-shape",
            lambda: cumm.grouped_matmul(h((8, 16)), h((2, 16, 8)), cupy.asarray([8], i32)),
            ValueError,
            r"offs must have shape \(2,\)",
        ),
        (
            "masked-range",
            lambda: cumm.grouped_matmul(h((2, 8, 16)), h((2, 16, 8)), masked_m=[1, 9]),
            ValueError,
            r"masked_m's counts must lie in \[0, max_m = 8\]",
        ),
        ("k-zero", lambda: cumm.grouped_matmul(h((8, 0)), h((2, 0, 8)), [4, 8]), ValueError, r"K must be at least 1"),
        ("no-groups", lambda: cumm.grouped_matmul(h((8, 16)), h((0, 16, 8)), []), ValueError, r"at least one group"),
        (
            "too-many-groups",
            lambda: cumm.grouped_matmul(h((8, 16)), h((1025, 16, 8)), [8] * 1025),
            ValueError,
            r"at most 1024 groups",
        ),
        (
            "out-shape",
            lambda: cumm.grouped_matmul(h((8, 16)), h((2, 16, 8)), [4, 8], out=h((8, 9))),
            ValueError,
            r"out must have shape \(8, 8\) and dtype bfloat16",
        ),
        (
            "out-columns",
            lambda: cumm.grouped_matmul(h((8, 16)), h((2, 16, 8)), [4, 8], out=h((8, 16))[:, ::2]),
            ValueError,
            r"out's rows must be contiguous",
        ),
        (
            "config",
            lambda: cumm.grouped_matmul(h((8, 16)), h((2, 16, 8)), [4, 8], config={"BN": 96}),
            cumm.ConfigError,
            r"BN % 64 == 0",
        ),
    ]


@gpu
def test_gpu_errors(sm90):
    for name, call, exc, pattern in _gpu_cases():
        with pytest.raises(exc, match=pattern):
            call()
            pytest.fail(f"{name}: no error")
