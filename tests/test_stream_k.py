"""wgmma_ws's stream-K tail (SK > 0): when the tiles are not a whole number of waves, the last tiles' k-slabs are
shared out in ranges and finished through a per-stream workspace. Its arithmetic is checked on the CPU; on the
GPU, shapes whose last wave is split (the whole tiles, partial tiles with edges, beta, float32 out), repeated
launches (the flags must be lowered again) and two streams at once, each against float64."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import cumm
from cumm.api.decision import decision
from cumm.ladder import rung_module

from .test_half import _inputs  # random normal operands rounded to the dtype

SPEC = cumm.kernel_spec("wgmma_ws")


def _tiles(cfg, M, N):
    return -(-M // cfg["BM"]) * -(-N // cfg["BN"])


def test_workspace_only_when_the_last_wave_is_partial():
    cfg = SPEC.default_config(90)
    assert cfg["SK"] > 0  # stream-K is the default
    assert SPEC.workspace(cfg, 4224, 4096, 4096, 132) == 0  # 528 tiles: four whole waves, no workspace
    assert SPEC.workspace({**cfg, "SK": 0}, 4096, 4096, 4096, 132) == 0
    blocks = 132
    want = 4096 * 4 + blocks * cfg["BM"] * cfg["BN"] * 4  # the flags at a fixed place, then a partial per block
    assert SPEC.workspace(cfg, 2112, 4096, 4096, blocks) == want  # 272 tiles: 2.06 waves
    assert SPEC.workspace(cfg, 8192, 8192, 8192, blocks) == want  # 2048 tiles: the last wave 0.52 full
    assert SPEC.workspace(cfg, 4096, 4096, 4096, blocks) == 0  # 512 tiles: 3.88 waves, the last 0.88 full
    assert SPEC.workspace(cfg, 100, 100, 100, 1) == 0  # one tile on one block
    assert SPEC.workspace(cfg, 2112, 4096, 4096, 4097) == 0  # more blocks than the kernel has flags for


def test_a_tail_of_short_tiles_is_not_split():
    """A tail behind whole waves is split only when its tiles have SK_MIN_SLABS k-slabs: the partial sums cost
    a few slabs' loads (H200, bf16 8192 x 8192 x 512: 0.92x cuBLAS split, 0.99x whole). Fewer tiles than blocks
    still share their slabs out, however short."""
    SK_MIN_SLABS = rung_module("wgmma_ws").SK_MIN_SLABS

    cfg = SPEC.default_config(90)
    assert SK_MIN_SLABS == 32
    assert SPEC.workspace(cfg, 8192, 8192, 512, 132) == 0  # 2048 tiles of 8 slabs, the last wave 0.52 full
    assert SPEC.workspace(cfg, 8192, 8192, 1984, 132) == 0  # 31 slabs
    assert SPEC.workspace(cfg, 8192, 8192, 1985, 132) > 0  # 32 slabs, the last partial
    assert SPEC.workspace(cfg, 8192, 8192, 2048, 132) > 0
    assert SPEC.workspace(cfg, 1000, 1000, 64, 132) > 0  # 32 tiles on 132 blocks, one slab each


def test_the_flags_sit_where_no_tile_shape_puts_partials():
    """One buffer serves every configuration on a stream: the flags come first, at the same place for every tile
    shape (they came after the partials, where another shape's partial sums read as raised flags)."""
    src = (Path(cumm.__file__).parent / "kernels" / "gemm" / "14_wgmma_ws" / "kernel.cu").read_text()
    assert "int* const flag = reinterpret_cast<int*>(skw);" in src and "#define CUMM_SK_FLAGS 4096" in src
    for bm, bn in ((128, 128), (128, 256), (256, 128)):
        cfg = {**SPEC.default_config(90), "BM": bm, "BN": bn}
        assert SPEC.workspace(cfg, 2112, 4000, 4096, 132) == 4096 * 4 + 132 * bm * bn * 4


def test_ping_pong_is_gone_and_sk_is_checked():
    """PP (ping-pong consumers, measured slower and removed) is no longer a parameter: naming it says so and lists
    the parameters there are, for any value; a negative SK is refused with its rule."""
    for pp in (0, 1):
        with pytest.raises(
            cumm.ConfigError, match=r"kernel 'wgmma_ws' has no parameter\(s\) \['PP'\]; its parameters are \[.*'SK'"
        ):
            cumm.compile("wgmma_ws", dict(SK=4, PP=pp), arch="sm_90a")
    assert "PP" not in SPEC.defaults and "PP" not in SPEC.space
    with pytest.raises(cumm.ConfigError, match="SK must be a non-negative integer"):
        cumm.compile("wgmma_ws", dict(SK=-1), arch="sm_90a")


def test_both_schedules_compile_without_spills():
    for sk in (0, 4):
        k = cumm.compile("wgmma_ws", dict(SK=sk), arch="sm_90a")
        assert k.spill_bytes == 0, k
    for bn, epi in ((64, 0), (128, 1), (256, 1)):  # one consumer warpgroup, 64-row tiles, whole tiles
        k = cumm.compile("wgmma_ws", dict(SK=0, WGS=1, NUM_THREADS=256, BM=64, BN=bn, EPI=epi), arch="sm_90a")
        assert k.spill_bytes == 0, k
    with pytest.raises(cumm.ConfigError, match=r"one consumer warpgroup \(WGS = 1\) runs whole tiles"):
        cumm.compile("wgmma_ws", dict(SK=4, WGS=1, NUM_THREADS=256, BM=64), arch="sm_90a")


# --- on the GPU ---

HALF = ("float16", "bfloat16")
# (M, N, K) whose 128 x 256 tiles leave a partial last wave on 132 (H100/H200) or other SM counts: 2112 rows end in
# a half tile (edge epilogue inside the stream-K part); 4000 columns end in a partial tile; K = 2056 is 33 slabs
# (the last partial); 2560 rows: 320 tiles, 2.42 waves. A tail is split only when its tiles are at least
# SK_MIN_SLABS slabs deep: 2112 x 4096 x 1000 (16 slabs) runs the stream-K binary with whole tiles. Fewer tiles
# than blocks (1000 x 1000: 32 tiles, 512 x 4096: 64): the grid takes every slot and each tile's slabs are shared
# by several blocks (a range inside a tile: neither its start nor its end); K = 64: one slab a tile, none shared.
SHAPES = [
    (2112, 4096, 2048),
    (2112, 4000, 2056),
    (2112, 4096, 1000),
    (1000, 1000, 2000),
    (512, 4096, 1000),
    (1000, 1000, 64),
    (2560, 4096, 4096),
]


def test_the_gpu_shapes_split_as_their_comment_says():
    cfg = SPEC.default_config(90)
    for M, N, K in SHAPES:
        split = SPEC.workspace(cfg, M, N, K, 132) > 0
        assert split == ((M, N, K) != (2112, 4096, 1000)), (M, N, K)


def _err(c, ref) -> float:
    import cupy

    d = c.astype(cupy.float64)
    return float(cupy.linalg.norm(d - ref)) / float(cupy.linalg.norm(ref))


def _ref(a, b):
    import cupy

    return a.astype(cupy.float64) @ b.astype(cupy.float64)


@pytest.mark.gpu
@pytest.mark.usefixtures("sm90")
@pytest.mark.parametrize("dt", HALF)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_stream_k_against_float64_and_whole_tiles(shape, dt, rng):
    import cupy

    M, N, K = shape
    a, b = _inputs(rng, M, N, K, dt)
    ref = _ref(a, b)
    whole = cumm.matmul(a, b, kernel="wgmma_ws", config=dict(SK=0), out=cupy.empty((M, N), cupy.float32))
    sk = dict(SK=4)  # the default tiles, given: without a tuned entry few tiles would take a named configuration
    for _ in range(3):  # the flags are lowered by each launch: a second and third launch find them so
        out = cupy.full((M, N), math.nan, dtype=cupy.float32)
        got = cumm.matmul(a, b, kernel="wgmma_ws", config=sk, out=out)
        assert decision(a, b, out, kernel="wgmma_ws", config=sk) == "wgmma_ws"
        # FP32 accumulation of exact products: only the order of the sums differs from whole tiles
        assert _err(whole, ref) < 1e-5 and _err(got, ref) <= 1.5 * _err(whole, ref) + 1e-7
        assert float(cupy.abs(got - whole).max()) <= 1e-4 * float(cupy.abs(whole).max())
    half = cumm.matmul(a, b, kernel="wgmma_ws", config=sk)  # a half result through the TMA-store epilogue
    assert half.dtype == a.dtype and _err(half.astype(cupy.float32), ref) < 5e-3


@pytest.mark.gpu
@pytest.mark.usefixtures("sm90")
@pytest.mark.parametrize("dt", HALF)
def test_stream_k_after_another_tile_shape_on_the_same_stream(dt, rng):
    """The workspace is shared by every configuration on a stream: each first launch after a change of tile shape
    is right (it once read the other shape's partial sums as raised flags)."""
    import cupy

    cases = [((200, 3000, 3000), dict(BN=128)), ((2112, 4096, 2048), dict(BN=256)), ((129, 4096, 2000), dict(BN=128))]
    for (M, N, K), over in cases * 2:
        a, b = _inputs(rng, M, N, K, dt)
        out = cupy.full((M, N), math.nan, dtype=cupy.float32)
        cumm.matmul(a, b, kernel="wgmma_ws", config=dict(over, SK=4), out=out)
        assert SPEC.workspace({**SPEC.default_config(90), **over}, M, N, K, 132) > 0  # stream-K on an H100/H200
        assert _err(out, _ref(a, b)) < 1e-5, (M, N, K, over)


@pytest.mark.gpu
@pytest.mark.usefixtures("sm90")
@pytest.mark.parametrize("sk", [1, 2])
@pytest.mark.parametrize("shape", [(1000, 1000, 2000), (1024, 1024, 8192), (2112, 4000, 2056)], ids=str)
def test_fewer_pieces_a_tile(shape, sk, rng):
    """SK = 1 or 2: each tile of the stream-K part shared by fewer blocks (some blocks idle when tiles are few)."""
    import cupy

    M, N, K = shape
    a, b = _inputs(rng, M, N, K, "bfloat16")
    for _ in range(2):
        out = cupy.full((M, N), math.nan, dtype=cupy.float32)
        cumm.matmul(a, b, kernel="wgmma_ws", config=dict(BN=128, SK=sk), out=out)
        assert _err(out, _ref(a, b)) < 1e-5, (shape, sk)


@pytest.mark.gpu
@pytest.mark.usefixtures("sm90")
def test_stream_k_with_beta_and_alpha(rng):
    import cupy

    M, N, K = 2112, 4000, 2056
    a, b = _inputs(rng, M, N, K, "bfloat16")
    assert SPEC.workspace(SPEC.default_config(90), M, N, K, 132) > 0  # stream-K on an H100/H200
    c0 = rng.standard_normal((M, N), dtype=cupy.float32)
    out = c0.copy()
    cumm.matmul(a, b, kernel="wgmma_ws", out=out, alpha=0.5, beta=-1.5)
    assert _err(out, 0.5 * _ref(a, b) - 1.5 * c0.astype(cupy.float64)) < 1e-5


@pytest.mark.gpu
@pytest.mark.usefixtures("sm90")
def test_stream_k_on_two_streams_at_once(rng):
    """Each stream has its own workspace: products queued on two streams, interleaved, are all right."""
    import cupy

    M, N, K = 2112, 4096, 2048
    pairs = [_inputs(rng, M, N, K, "float16") for _ in range(4)]
    streams = [cupy.cuda.Stream(non_blocking=True) for _ in range(2)]
    outs = []
    for i, (a, b) in enumerate(pairs * 2):
        with streams[i % 2]:
            outs.append(cumm.matmul(a, b, kernel="wgmma_ws", out=cupy.empty((M, N), cupy.float32)))
    for s in streams:
        s.synchronize()
    for (a, b), out in zip(pairs * 2, outs, strict=True):
        assert _err(out, _ref(a, b)) < 1e-5
