"""Split-K: slice arithmetic, the kernel="auto" split heuristic and argument errors (CPU); results (GPU)."""

from __future__ import annotations

import math
import re

import pytest

import cumm
from cumm.api.decision import decision
from cumm.core.spec import cdiv
from cumm.ladder import REGISTRY, get_spec, split_kernels
from cumm.plan import auto as _auto
from cumm.plan import splitk as _splitk
from cumm.plan import store as _store
from cumm.runtime.render import template_text

from .conftest import check_alpha_beta, rel_err

TOL = 1e-5
SPLIT_KERNELS = ["warptile", "double_buffer"]
H200_SMS = 132
GPU, CC = "NVIDIA H200", 90

# ----------------------------------------------------------------------------------------------------------
# Slices of K (a mirror of cumm_k_slice in common.cuh)
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bk", [4, 6, 8, 16, 32])
def test_slices_partition_k_into_whole_aligned_slabs(bk):
    g = _splitk.granule(bk)
    assert g % 4 == 0 and g % bk == 0 and g <= 4 * bk
    for K in [*range(1, 200), 255, 256, 257, 1000, 4096, 4097, 4099, 65537]:
        for S in (1, 2, 3, 5, 7, 16, 64, 1000):
            eff = _splitk.effective_splits(K, S, bk)
            assert 1 <= eff <= min(S, cdiv(K, bk)), (K, S, bk, eff)
            kc = _splitk.slice_depth(K, S, bk)
            assert kc % g == 0
            # the device derives KC from the launched count: the same for eff slices as for S
            assert _splitk.slice_depth(K, eff, bk) == kc, (K, S, bk)
            ranges = [_splitk.k_range(K, eff, bk, z) for z in range(eff)]
            assert ranges[0][0] == 0 and ranges[-1][1] == K
            for (k0, k1), (n0, _) in zip(ranges, ranges[1:] + [(K, K)], strict=True):
                assert k0 < k1 == n0, (K, S, bk, ranges)  # contiguous, every launched slice has work
                assert k0 % g == 0  # A + k0 keeps 16-byte alignment; slices start on a slab
            # slices past the effective count (as when launched with S) are empty
            assert all(_splitk.k_range(K, S, bk, z) == (0, 0) for z in range(eff, S))


def test_effective_splits_examples():
    assert _splitk.effective_splits(4096, 16, 16) == 16  # KC = 256
    assert _splitk.effective_splits(4099, 64, 16) == 52  # KC = 80: 52 slices cover 4099
    assert _splitk.effective_splits(1, 64, 16) == 1
    assert _splitk.effective_splits(1000, 7, 16) == 7  # KC = 144
    assert _splitk.effective_splits(10**6, 10**6, 8) == cdiv(10**6, 16)  # clamped to 65535, then KC = 16
    assert _splitk.effective_splits(2**31 - 1, 10**9, 16) <= _splitk.MAX_SPLITS


def test_device_slice_function_matches_the_mirror(tmp_path):
    """cumm_k_slice from common.cuh, compiled for the host by a C++ compiler, against _splitk.k_range."""
    import random
    import shutil
    import subprocess

    cxx = shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no host C++ compiler (g++ or clang++)")
    src = template_text("include/common.cuh")
    start = src.index("__device__ __forceinline__ int2 cumm_k_slice")
    fn = src[start : src.index("#if CUMM_BATCHED\n#define CUMM_SPLIT_K")]
    (tmp_path / "ks.cpp").write_text(
        "#include <algorithm>\n#include <cstdio>\ntypedef long long i64;\nstruct int2 { int x, y; };\n"
        "static int2 make_int2(int a, int b) { return {a, b}; }\nusing std::min;\n"
        "#define __device__\n#define __forceinline__ inline\n"
        + fn
        + 'int main() { int K, S, G, z; while (scanf("%d %d %d %d", &K, &S, &G, &z) == 4) {'
        ' int2 r = cumm_k_slice(K, S, z, G); printf("%d %d\\n", r.x, r.y); } }\n'
    )
    exe = tmp_path / "ks"
    subprocess.run([cxx, "-O1", "-o", str(exe), str(tmp_path / "ks.cpp")], check=True)
    rnd = random.Random(0)
    cases = [
        (K, S, bk, rnd.randrange(S))
        for _ in range(5000)
        for K in [rnd.choice([rnd.randint(1, 300), rnd.randint(1, 10**6), 2**31 - 1 - rnd.randint(0, 999)])]
        for S in [rnd.choice([rnd.randint(1, 70), rnd.randint(1, _splitk.MAX_SPLITS)])]
        for bk in [rnd.choice([3, 4, 6, 8, 16, 32])]
    ]
    text = "\n".join(f"{K} {S} {_splitk.granule(bk)} {z}" for K, S, bk, z in cases)
    got = subprocess.run([str(exe)], input=text, capture_output=True, text=True, check=True).stdout.split()
    got = list(zip(map(int, got[0::2]), map(int, got[1::2]), strict=True))
    want = [_splitk.k_range(*c) for c in cases]
    assert len(got) == len(want)
    bad = [(c, g, w) for c, g, w in zip(cases, got, want, strict=True) if g != w]
    assert not bad, bad[:5]
    assert "(BK_) % 4 == 0 ? (BK_)" in src and "2 * (BK_) : 4 * (BK_)" in src  # G = lcm(BK, 4), as granule()


def test_spec_flag_matches_the_templates():
    """split_k in a spec <=> its template calls CUMM_SPLIT_K(BK); such a kernel has grid z = 1."""
    assert {"warptile", "double_buffer"} <= set(split_kernels())
    for name, spec in REGISTRY.items():
        calls = re.search(r"^\s*CUMM_SPLIT_K\(BK\);", template_text(spec.template), re.M) is not None
        assert calls == spec.split_k, name
        if spec.split_k:
            assert spec.kind == "gemm" and "BK" in spec.params
            assert spec.grid(spec.default_config(), 1000, 1000, 1000)[2] == 1


def test_split_spec_needs_bk():
    base = REGISTRY["smem"]
    with pytest.raises(ValueError, match="BK"):
        type(base)(
            name="x",
            template="gemm/03_smem/kernel.cu",
            summary="",
            defaults=dict(BS=32),
            block=base.block,
            grid=base.grid,
            split_k=True,
        )


# ----------------------------------------------------------------------------------------------------------
# The heuristic (pure) and select
# ----------------------------------------------------------------------------------------------------------


def test_split_count_motivating_case():
    # 64 x 64 x 4096 on 64 x 64 tiles: one block for 132 SMs; slices of 256 -> 16
    assert _auto.split_count(64, 64, 4096, 64, 64, H200_SMS) == 16
    assert _auto.split_count(64, 64, 4096, 128, 128, H200_SMS) == 16
    assert _auto.split_count(64, 64, 1 << 20, 64, 64, H200_SMS) == H200_SMS  # one wave caps it


@pytest.mark.parametrize(
    "shape",
    [
        (4096, 4096, 4096),  # the grid fills the GPU
        (64, 64, 511),  # shallow
        (512, 512, 1024),  # K < 4 * max(M, N)
        (1024, 1024, 1 << 16),  # 256 blocks of 64 x 64 >= 132
        (1, 1, 1),
        (64, 64, 300),
    ],
)
def test_split_count_no_split(shape):
    assert _auto.split_count(*shape, 64, 64, H200_SMS) == 1


def test_split_count_invariants():
    for M in (1, 7, 64, 100, 256, 700):
        for N in (1, 33, 64, 500):
            for K in (1, 100, 512, 1000, 2048, 4096, 4099, 100_000):
                for sms in (1, 2, 108, 132):
                    for bm, bn in ((64, 64), (128, 128)):
                        s = _auto.split_count(M, N, K, bm, bn, sms)
                        blocks = cdiv(M, bm) * cdiv(N, bn)
                        assert s >= 1
                        if s > 1:
                            assert blocks * s <= sms  # at most one wave
                            assert K // s >= _auto.SPLIT_MIN_DEPTH
                            assert K >= _auto.SPLIT_MIN_K and K >= _auto.SPLIT_K_RATIO * max(M, N)


@pytest.fixture
def fake_h200(tmp_path, monkeypatch):
    """Device 0 looks like an H200, no tuned tables but the test's own; nothing touches a GPU."""
    monkeypatch.setenv("CUMM_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(_store, "shipped_tables", lambda: [])
    monkeypatch.setattr(_store, "_warned", set())
    monkeypatch.setattr(_auto, "device_key", lambda device_id: (GPU, CC))
    monkeypatch.setattr(_auto, "multiprocessors", lambda device_id: H200_SMS)
    _store.clear_caches()
    yield
    _store.clear_caches()


def _entry(kernel, shape, tflops=30.0, **extra):
    cfg = get_spec(kernel).resolve(None, CC)
    e = _store.make_entry(GPU, CC, kernel, "float32", shape, cfg, 2 * math.prod(shape) / tflops / 1e9, tflops)
    e.update(extra)
    return e


def test_select_splits_the_motivating_case(fake_h200):
    # the top rung on sm_90 (wgmma_tf32x3) runs unsplit: a deep, narrow product goes to the first rung that splits
    top, split = _auto.top(CC), _auto.top(CC, split=True)
    assert not get_spec(top).split_k and get_spec(split).split_k
    assert _auto.select(64, 64, 4096, 0) == (split, _auto.SMALL_TILES[split], 16)
    assert _auto.select(64, 64, 4096, 0, split_k=3) == (split, _auto.SMALL_TILES[split], 3)
    assert _auto.select(64, 64, 4096, 0, split_k=1) == (top, _auto.SMALL_TILES[top], 1)
    big = _auto.top(CC, shape=(4096, 4096, 4096, H200_SMS))  # the FP16-pieces rung takes large products
    assert big == "wgmma_f16x3" and _auto.select(4096, 4096, 4096, 0) == (big, None, 1)
    # a caller's config: kept; the split follows its tiles (BM/BN over the rung's defaults)
    assert _auto.select(64, 64, 4096, 0, {"BK": 8}) == (split, {"BK": 8}, 16)
    assert _auto.select(300, 300, 8192, 0, {"BM": 64, "BN": 64}) == (split, {"BM": 64, "BN": 64}, 5)
    assert _auto.select(64, 64, 4096, 0, {"BM": 0})[2] == 1  # invalid: get_plan reports it, no ZeroDivisionError


def test_select_batched_takes_a_rung_that_runs_batches(fake_h200):
    from cumm.runtime.render import supports_batch

    kernel, _, splits = _auto.select(64, 64, 4096, 0, batched=8)
    assert supports_batch(get_spec(kernel)) and splits == 1  # deep and narrow, but a batch is not split
    assert supports_batch(get_spec(_auto.top(CC))) and _auto.top(CC, batched=True) == _auto.top(CC)  # 3-D maps
    assert _auto.select(4096, 4096, 4096, 0, batched=2)[:2] == (_auto.top(CC), None)
    # the tiles of a batch add up: 64 products of 256 x 256 fill the GPU with the default tiles, 2 do not
    assert _auto.select(256, 256, 256, 0, batched=64) == (_auto.top(CC), None, 1)
    assert _auto.select(256, 256, 256, 0, batched=2) == (_auto.top(CC), _auto.SMALL_TILES[_auto.top(CC)], 1)


def test_select_tuned_entries_and_split(fake_h200):
    _store.save_entries([_entry(_auto.top(CC), (64, 64, 4096), tflops=20.0)])  # raced against the top rung
    _store.save_entries([_entry("warptile", (64, 64, 4096))])
    assert _auto.select(64, 64, 4096, 0)[2] == 1  # a tuned entry without "split_k": no split
    assert _auto.select(64, 64, 4096, 0, split_k=4)[2] == 4
    _store.save_entries([_entry("warptile", (64, 64, 4096), split_k=8)])
    _auto.clear_cache()
    assert _auto.select(64, 64, 4096, 0) == ("warptile", dict(get_spec("warptile").resolve(None, CC)), 8)
    _store.save_entries([_entry("warptile", (64, 64, 4096), split_k="eight")])
    _auto.clear_cache()
    assert _auto.select(64, 64, 4096, 0)[2] == 1  # malformed: ignored


def test_select_skips_a_tuned_kernel_without_split_when_split_is_asked(fake_h200):
    _store.save_entries([_entry(_auto.top(CC), (64, 64, 4096), tflops=20.0)])
    _store.save_entries([_entry("vectorized", (64, 64, 4096), split_k=4)])
    assert _auto.select(64, 64, 4096, 0)[:2] == ("vectorized", dict(get_spec("vectorized").resolve(None, CC)))
    assert _auto.select(64, 64, 4096, 0)[2] == 1  # the field is ignored for a kernel without split-K
    split = _auto.top(CC, split=True)
    assert _auto.select(64, 64, 4096, 0, split_k=4) == (split, _auto.SMALL_TILES[split], 4)


def test_select_ignores_a_bucket_tuned_without_the_top_rung(fake_h200):
    # a table made before the top rung existed (or changed): its winner never raced it, the heuristic runs
    top = _auto.top(CC, shape=(4096, 4096, 4096, H200_SMS))  # (the top rung for these shapes)
    _store.save_entries([_entry("tf32x3", (4096, 4096, 4096), tflops=60.0)])
    assert _auto.select(4096, 4096, 4096, 0) == (top, None, 1)
    assert _auto.named("tf32x3", 4096, 4096, 4096, 0) == dict(get_spec("tf32x3").resolve(None, CC))  # still its own
    _store.save_entries([_entry(top, (2048, 2048, 2048), tflops=90.0)])  # the top rung, but at another bucket
    assert _auto.select(4096, 4096, 4096, 0) == (top, None, 1)
    _store.save_entries([_entry(top, (4096, 4096, 4096), tflops=50.0)])  # raced and slower there: the table wins
    assert _auto.select(4096, 4096, 4096, 0)[0] == "tf32x3"
    _store.save_entries([_entry(top, (4096, 4096, 4096), tflops=120.0)])
    assert _auto.select(4096, 4096, 4096, 0)[0] == top


# ----------------------------------------------------------------------------------------------------------
# Argument errors (raised before anything touches the GPU)
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [1.5, 2.0, "2", True])
def test_split_k_must_be_an_int(bad):
    with pytest.raises(TypeError, match="split_k must be an int"):
        cumm.matmul(None, None, split_k=bad)


@pytest.mark.parametrize("bad", [0, -1])
def test_split_k_must_be_positive(bad):
    with pytest.raises(ValueError, match="split_k must be at least 1"):
        cumm.matmul(None, None, split_k=bad)


def test_split_k_needs_a_kernel_that_supports_it():
    with pytest.raises(ValueError, match=r"'naive' does not support split_k=2.*'warptile', 'double_buffer'"):
        cumm.matmul(None, None, kernel="naive", split_k=2)
    with pytest.raises(ValueError, match="unknown kernel 'nope'"):
        cumm.matmul(None, None, kernel="nope", split_k=2)
    # split_k=1 is no split: any kernel; the operand check comes next
    with pytest.raises(TypeError, match="a must be a GPU array"):
        cumm.matmul(None, None, kernel="naive", split_k=1)
    import numpy as np

    assert _splitk.check_arg(np.int64(3), "warptile") == 3


# ----------------------------------------------------------------------------------------------------------
# GPU: results against float64, NaN-poisoned outputs
# ----------------------------------------------------------------------------------------------------------

SHAPES = [(1, 1, 1), (64, 64, 4096), (3, 5, 4099), (127, 131, 1000), (33, 17, 4097)]


def _operands(rng, M, N, K):
    import cupy

    a = rng.standard_normal((M, K), dtype=cupy.float32)
    b = rng.standard_normal((K, N), dtype=cupy.float32)
    return a, b, a.astype(cupy.float64) @ b.astype(cupy.float64)


def _poisoned(M, N):
    import cupy

    return cupy.full((M, N), math.nan, dtype=cupy.float32)


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", SPLIT_KERNELS)
@pytest.mark.parametrize("split_k", [2, 3, 7, 64])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_split_against_float64(kernel, split_k, shape, rng):
    M, N, K = shape
    a, b, ref = _operands(rng, M, N, K)
    out = _poisoned(M, N)
    assert cumm.matmul(a, b, kernel=kernel, out=out, split_k=split_k) is out
    err = rel_err(out, ref)
    assert err < TOL, f"{kernel} split_k={split_k} {shape}: relative error {err:.3e}"


@pytest.mark.gpu
def test_cached_split_calls_launch_on_the_caller_s_arrays(rng):
    """A split call on cupy arrays is a cached call's two driver launches on the caller's pointers (the slices into
    a workspace from cupy's pool, then the reduce): repeated calls, new pointers of the same key, alpha, beta and a
    strided, unaligned out."""
    import cupy

    M, N, K = 33, 130, 4099
    a, b, ref = _operands(rng, M, N, K)
    for _ in range(3):
        out = _poisoned(M, N)
        cumm.matmul(a, b, kernel="tf32x3", split_k=4, out=out)
        assert rel_err(out, ref) < TOL
    a2, b2 = a.copy(), b.copy()
    big = cupy.full((M, N + 7), 1.0, dtype=cupy.float32)
    out = big[:, 3 : N + 3]
    cumm.matmul(a2, b2, kernel="tf32x3", split_k=4, out=out, alpha=2.0, beta=0.5)
    assert rel_err(out, 2.0 * ref + 0.5) < TOL
    assert float(big[:, :3].min()) == 1.0 and float(big[:, N + 3 :].max()) == 1.0  # nothing written beside out
    assert "split_k=4" in decision(a2, b2, out, kernel="tf32x3", beta=0.5, split_k=4)


@pytest.mark.gpu
def test_cached_split_calls_on_torch_tensors(rng):
    """Torch tensors take the same two launches, the workspace from torch's caching allocator on torch's current
    stream: repeated calls, a side stream, alpha and beta into a given out."""
    torch = pytest.importorskip("torch")
    M, N, K = 33, 130, 4099
    a = torch.randn(M, K, device="cuda", dtype=torch.float64)
    b = torch.randn(K, N, device="cuda", dtype=torch.float64)
    ref = a @ b
    a32, b32 = a.float(), b.float()
    for _ in range(3):
        out = cumm.matmul(a32, b32, kernel="tf32x3", split_k=4)
        assert ((out.double() - ref).norm() / ref.norm()).item() < TOL
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        c = torch.full((M, N), 1.0, device="cuda")
        for _ in range(3):
            c.fill_(1.0)
            cumm.matmul(a32, b32, kernel="tf32x3", split_k=4, out=c, alpha=2.0, beta=0.5)
    side.synchronize()
    assert ((c.double() - (2.0 * ref + 0.5)).norm() / (2.0 * ref + 0.5).norm()).item() < TOL
    assert "split_k=4" in decision(a32, b32, c, kernel="tf32x3", beta=0.5, split_k=4)


# tf32x3's 32-row tiles (the tuned decode entries: 32 x 128 tiles with K in 4-8 slices), whole and split, on odd shapes
ROWS32 = dict(BM=32, BN=128, BK=32, WM=32, WN=32, STAGES=4, NUM_THREADS=128, MINB=1)


@pytest.mark.gpu
@pytest.mark.parametrize("split_k", [1, 4, 8])
@pytest.mark.parametrize(
    "shape", [*SHAPES, (17, 4097, 4099), (32, 6144, 4096), (40, 129, 14336)], ids=lambda s: "x".join(map(str, s))
)
def test_tf32x3_32_row_tiles(split_k, shape, rng):
    M, N, K = shape
    a, b, ref = _operands(rng, M, N, K)
    out = _poisoned(M, N)
    cumm.matmul(a, b, kernel="tf32x3", config=ROWS32, out=out, split_k=split_k)
    err = rel_err(out, ref)
    assert err < TOL, f"tf32x3 32-row tiles split_k={split_k} {shape}: relative error {err:.3e}"
    got = cumm.matmul(a, b)  # auto: near the decode shapes, a tuned split entry on these tiles
    assert rel_err(got, ref) < TOL


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", SPLIT_KERNELS)
def test_split_alpha_beta(kernel, rng):
    check_alpha_beta(rng, 127, 131, 1000, TOL, kernel=kernel, split_k=5)


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", SPLIT_KERNELS)
@pytest.mark.parametrize("N", [67, 64])  # 64: the workspace allows 16-byte stores while out does not
def test_split_strided_and_misaligned_views(kernel, N, rng):
    import cupy

    M, K = 131, 1501
    big_a = rng.standard_normal((M + 1, K + 3), dtype=cupy.float32)
    big_b = rng.standard_normal((K, N + 5), dtype=cupy.float32)
    a = big_a[1:, 1 : K + 1]  # misaligned, row stride K + 3
    b = big_b[:, 2 : N + 2]
    ref = a.astype(cupy.float64) @ b.astype(cupy.float64)
    big_out = _poisoned(M, N + 1)
    out = big_out[:, 1:]  # row-strided, misaligned output
    cumm.matmul(a, b, kernel=kernel, out=out, split_k=6)
    assert rel_err(out, ref) < TOL
    assert cupy.isnan(big_out[:, 0]).all(), "wrote outside out"
    c0 = rng.standard_normal((M, N), dtype=cupy.float32)
    out[...] = c0
    cumm.matmul(a, b, kernel=kernel, out=out, alpha=0.5, beta=-1.0, split_k=6)
    assert rel_err(out, 0.5 * ref - c0.astype(cupy.float64)) < TOL
    assert cupy.isnan(big_out[:, 0]).all(), "wrote outside out"


@pytest.mark.gpu
def test_auto_splits_the_motivating_case(rng, tmp_path, monkeypatch):
    import cupy

    M, N, K = 64, 64, 4096
    monkeypatch.setenv("CUMM_CACHE_DIR", str(tmp_path))  # the heuristic, not a tuned entry
    monkeypatch.setattr(_store, "shipped_tables", lambda: [])
    _store.clear_caches()
    kernel, _, splits = _auto.select(M, N, K, cupy.cuda.runtime.getDevice())
    assert splits > 1 and get_spec(kernel).split_k
    a, b, ref = _operands(rng, M, N, K)
    out = _poisoned(M, N)
    cumm.matmul(a, b, out=out)
    assert rel_err(out, ref) < TOL
    again = _poisoned(M, N)
    cumm.matmul(a, b, out=again)
    assert bool((again == out).all()), "split-K must be deterministic"
    assert rel_err(cumm.matmul(a, b, split_k=1), ref) < TOL
    _store.clear_caches()


@pytest.mark.gpu
def test_multi_dot_chain_with_a_deep_middle_product(rng):
    import cupy

    x = rng.standard_normal((4096, 64), dtype=cupy.float32)
    y = rng.standard_normal((64, 4096), dtype=cupy.float32)
    z = rng.standard_normal((4096, 64), dtype=cupy.float32)
    ref = x.astype(cupy.float64) @ (y.astype(cupy.float64) @ z.astype(cupy.float64))
    assert rel_err(cumm.multi_dot([x, y, z]), ref) < TOL


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", SPLIT_KERNELS)
def test_empty_slices_write_zeros(kernel, rng):
    """Launched with more slices than K fills (as the host never does), the empty ones write zeros."""
    import cupy
    import numpy as np

    from cumm.plan.operands import aligned as _aligned
    from cumm.plan.plan import get_plan

    M, N, K, S = 33, 20, 4099, 64
    a, b, ref = _operands(rng, M, N, K)
    ws = cupy.full((S, M, N), math.nan, dtype=cupy.float32)
    flags = (_aligned(a, K), _aligned(b, N), _aligned(ws, N))
    plan = get_plan(kernel, None, flags, cupy.cuda.runtime.getDevice())
    bk = plan.cfg["BK"]
    eff = _splitk.effective_splits(K, S, bk)
    assert eff < S
    gx, gy, _ = plan.spec.grid(plan.cfg, M, N, K)
    i32, f32 = np.int32, np.float32
    plan.kern(
        (gx, gy, S),
        plan.block,
        (i32(M), i32(N), i32(K), f32(7.0), a, i32(K), b, i32(N), f32(1.0), ws, i32(N)),
        shared_mem=plan.smem,
    )
    assert bool((ws[eff:] == 0).all()), "empty slices must write zeros"
    assert not bool(cupy.isnan(ws[:eff]).any())
    for z in (0, eff - 1):  # raw partial sums (alpha = 1, beta = 0 whatever was passed)
        k0, k1 = _splitk.k_range(K, S, bk, z)
        part = a[:, k0:k1].astype(cupy.float64) @ b[k0:k1].astype(cupy.float64)
        assert rel_err(ws[z], part) < TOL
    assert rel_err(ws.sum(0), ref) < TOL
