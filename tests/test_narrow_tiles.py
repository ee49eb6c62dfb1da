"""wgmma_ws with tiles of 3/4 the defaults' area: where 128 x 256 tiles leave multiprocessors idle in their last
round (1024 x 3072: 96 tiles on 132 multiprocessors), 128 narrower 128 x 192 tiles fill the GPU in the same one
round; at 3072 x 1024, 128 taller 192 x 128 tiles (three consumer warpgroups) do; at 1536 x 3072, where 144 wide
tiles take two rounds, 128 tiles of 192 x 192 (three warpgroups, 9/8 the area) take one. cumm picks them through the
spec's shape_config; the TMA-store epilogue stores a 192-column tile as a 128-column chunk and a 64-column one.
On the CPU: the rule, the configurations it leaves alone, offline compiles. On the GPU: both tiles against
float64 on odd shapes (whole tiles, stream-K, a half result through the copy engine, beta), and the call's
decision with and without a configuration given."""

from __future__ import annotations

import dataclasses
import math

import pytest

import cumm
from cumm.api.decision import decision

from .test_half import _cublas, _dtype, _err, _inputs, _ref

SPEC = cumm.kernel_spec("wgmma_ws")
CFG = SPEC.default_config(90)
TALL = dict(BM=192, BN=128, WGS=3, NUM_THREADS=512, SK=0)  # three consumer warpgroups of 64 rows
SQUARE = dict(BM=192, BN=192, WGS=3, NUM_THREADS=512, SK=0, STAGES=3)  # three of 64 x 192, three stages


@pytest.mark.parametrize(
    "shape, want",
    [
        ((1024, 3072, 4096), {"BN": 192}),  # 96 tiles -> 128: one round either way, each 3/4 of the work
        ((768, 4096, 4096), {"BN": 192}),  # 96 -> 132
        ((2048, 3072, 4096), {"BN": 192}),  # 192 -> 256 tiles: two rounds either way
        ((3072, 2048, 1024), {"BN": 192}),  # 192 -> 264 tiles: two rounds (K plays no part)
        ((2048, 2048, 4096), {}),  # 128 tiles, one round; 176 narrow ones would take two
        ((4096, 4096, 4096), {}),  # 4 rounds of wide tiles against 6 of narrow ones
        ((3000, 5000, 2000), {}),  # 5 rounds of narrow tiles against 4 of wide: 0.94, not a fifth less
        ((1024, 1024, 8192), {}),  # 32 tiles: stream-K shares out their slabs
        ((512, 3072, 4096), {}),  # 48 tiles: fewer than half the multiprocessors (one warpgroup's tiles)
        ((3072, 1024, 4096), TALL),  # 96 wide tiles -> 128 tall ones (144 narrow ones would take two rounds)
        ((6144, 1024, 1024), TALL),  # 192 -> 256: two rounds, each 3/4 of the work
        ((3072, 3072, 4096), {"BN": 192}),  # both cut 3 rounds of wide tiles to 3 of smaller ones: the first wins
        ((1536, 3072, 4096), SQUARE),  # 144 wide tiles (two rounds) -> 128 of 192 x 192 (one)
        ((3072, 1536, 1024), SQUARE),  # the same, transposed (K plays no part)
        ((768, 6144, 4096), SQUARE),  # 144 -> 128
        ((1152, 4096, 4096), SQUARE),  # 144 -> 132
        ((1536, 6144, 4096), {"BN": 192}),  # 2 rounds of 192 x 192 cost as much as 3 of 128 x 192: the first wins
        ((2304, 3072, 4096), {}),  # 216 wide tiles and 192 square ones both take two rounds
    ],
)
def test_narrow_tiles_where_the_rounds_drop_by_a_fifth(shape, want):
    assert SPEC.shape_config(CFG, *shape, 132) == want


def test_the_rule_leaves_other_tiles_alone():
    for over in ({"WGS": 1, "NUM_THREADS": 256, "BN": 128}, {"CL": 2}, {"BN": 128}, {"BM": 256, "BN": 128}):
        assert SPEC.shape_config({**CFG, **over}, 1024, 3072, 4096, 132) == {}, over
    # the count of multiprocessors decides: on 96 of them the wide tiles fill one whole round
    assert SPEC.shape_config(CFG, 1024, 3072, 4096, 96) == {}


def test_narrow_tiles_are_in_the_tuners_space():
    assert 192 in SPEC.space["BN"] and 192 in SPEC.space["BM"] and 3 in SPEC.space["WGS"]
    k = cumm.compile("wgmma_ws", dict(BN=192, EPI=1), arch="sm_90a")  # a valid configuration
    assert k.spill_bytes == 0


def test_three_warpgroups_run_whole_tiles_of_at_most_96_accumulators_a_thread():
    assert not SPEC.violations({**CFG, **SQUARE})
    for bad, what in (
        ({"SK": 4}, "SK = 0"),
        ({"CL": 2}, "CL = 1"),
        ({"BN": 256}, "12288 WGS for WGS = 3"),
        ({"BN": 192, "STAGES": 4}, "fit in 227 KB"),
        ({"NUM_THREADS": 384}, "NUM_THREADS is a producer and WGS consumer"),
        ({"WGS": 4, "NUM_THREADS": 640, "BM": 256}, "one, two or three consumer warpgroups"),
    ):
        with pytest.raises(cumm.ConfigError, match=what):
            SPEC.resolve({**TALL, **bad}, 90)


@pytest.mark.parametrize(
    "flags",
    [(1, 1, 1, 0, 1), (1, 1, 1, 0, 2), (1, 1, 1, 1, 1), (1, 1, 1, 0, 2, 2), (1, 1, 0, 0, 1)],
    ids=["bf16", "fp16", "batched", "transposed_b", "c_unaligned"],
)
@pytest.mark.parametrize("sk", [0, 4])
def test_narrow_tiles_compile_without_spills(flags, sk):
    from cumm.runtime.compile import compile_offline

    k = compile_offline(SPEC, SPEC.resolve(dict(BN=192, SK=sk), 90), "sm_90a", flags)
    assert k.spill_stores == 0 and k.spill_loads == 0 and k.registers == 168, k
    if sk == 0:  # the tall and square tiles: 512 threads, 128 registers at launch
        for tiles in (TALL, SQUARE):
            k = compile_offline(SPEC, SPEC.resolve(tiles, 90), "sm_90a", flags)
            assert k.spill_stores == 0 and k.spill_loads == 0 and k.registers == 128, (tiles, k)


# --- on the GPU ---

HALF = ("float16", "bfloat16")
# one tile, primes, K = 7, M = 1 and N = 1, a last tile of 64 columns or fewer (N = 200: 192 + 8; N = 4104), fewer
# tiles than multiprocessors (their slabs shared out: 1000 x 1000 x 2000), a stream-K tail behind a whole round
# (1152 x 3840 x 2056: 180 tiles, 48 in the second round); and 3100 x 1000: a last row of 28 in the tall tiles
SHAPES = [
    (1, 1, 1),
    (127, 131, 137),
    (4097, 200, 7),
    (1, 4104, 520),
    (300, 1, 72),
    (1000, 1000, 2000),
    (1152, 3840, 2056),
]


TILES = {"narrow": dict(BN=192, SK=0), "narrow_sk": dict(BN=192, SK=4), "tall": TALL, "square": SQUARE}


@pytest.mark.gpu
@pytest.mark.usefixtures("sm90")
@pytest.mark.parametrize("dt", HALF)
@pytest.mark.parametrize("tiles", TILES)
@pytest.mark.parametrize("shape", [*SHAPES, (3100, 1000, 136)], ids=lambda s: "x".join(map(str, s)))
def test_narrow_tiles_against_float64(shape, tiles, dt, rng):
    import cupy

    M, N, K = shape
    a, b = _inputs(rng, M, N, K, dt)
    ref = _ref(a, b)
    cfg = TILES[tiles]
    for _ in range(3):  # stream-K's flags are lowered by each launch: later launches find them so
        out = cupy.full((M, N), math.nan, dtype=cupy.float32)
        cumm.matmul(a, b, kernel="wgmma_ws", config=cfg, out=out)
        assert _err(out, ref) < 1e-5, (shape, tiles)  # FP32 sums of products exact in FP32: only their order differs
    theirs = _err(_cublas(a, b), ref)
    half = cupy.full((M, N), math.nan, dtype=a.dtype)  # a half result through the TMA-store epilogue
    cumm.matmul(a, b, kernel="wgmma_ws", config=cfg, out=half)
    assert _err(half, ref) <= 1.5 * theirs + 1e-7, (shape, tiles, _err(half, ref), theirs)


@pytest.mark.gpu
@pytest.mark.usefixtures("sm90")
@pytest.mark.parametrize("dt", HALF)
@pytest.mark.parametrize("tiles", ["narrow", "tall", "square"])
@pytest.mark.parametrize("shape", [(1000, 1000, 100), (2048, 3072, 136), (127, 131, 137)], ids=str)
def test_narrow_tiles_with_beta_and_a_half_result(shape, tiles, dt, rng):
    """beta != 0 through the TMA epilogue: C's last 64-column chunk is loaded as one box; columns past N stay."""
    import cupy

    M, N, K = shape
    a, b = _inputs(rng, M, N, K, dt)
    c0 = rng.standard_normal((M, N), dtype="float32").astype(_dtype(dt))
    big = cupy.full((M, N + 8), 7.0, dtype=a.dtype)  # a guard band past column N
    out = big[:, :N]
    out[...] = c0
    ref = 0.5 * _ref(a, b) - 1.5 * c0.astype(cupy.float64)
    cumm.matmul(a, b, kernel="wgmma_ws", config=TILES[tiles], out=out, alpha=0.5, beta=-1.5)
    rounded = _err(ref.astype(cupy.float32).astype(a.dtype), ref)  # rounding the exact result to the half dtype
    assert _err(out, ref) <= 1.5 * rounded + 1e-7, (_err(out, ref), rounded)
    assert bool((big[:, N:] == 7.0).all()), "columns past N were written"


@pytest.fixture
def untuned():
    """wgmma_ws under a name without tuned entries, so that it runs its defaults (and the rule) on any GPU."""
    spec = cumm.register(dataclasses.replace(SPEC, name="wgmma_ws_untuned"))
    yield spec.name
    cumm.unregister(spec.name)


@pytest.mark.gpu
@pytest.mark.usefixtures("sm90")
@pytest.mark.parametrize("dt", HALF)
def test_cumm_picks_narrow_tiles_by_the_rounds(untuned, dt, rng):
    """Without a configuration the call runs what the rule says for this GPU's multiprocessors; with one given it
    runs as given."""
    import cupy

    from cumm.runtime.driver import multiprocessors as _sms

    sms = _sms(cupy.cuda.Device().id)
    for M, N in ((1024, 3072), (2048, 2048)):
        a, b = _inputs(rng, M, N, 64, dt)
        out = cupy.full((M, N), math.nan, dtype=a.dtype)
        cumm.matmul(a, b, kernel=untuned, out=out)
        narrow = SPEC.shape_config(CFG, M, N, 64, sms) == {"BN": 192}
        assert ("BN=192" in decision(a, b, out, kernel=untuned)) == narrow, (M, N, sms)
        assert _err(out, _ref(a, b)) <= 1.5 * _err(_cublas(a, b), _ref(a, b)) + 1e-7
        given = dict(BN=256)
        assert "BN=192" not in decision(a, b, out, kernel=untuned, config=given)


@pytest.mark.gpu
@pytest.mark.usefixtures("sm90")
@pytest.mark.parametrize("dt", HALF)
def test_a_batch_takes_the_tiles_of_one_product_as_tall_as_the_batch(untuned, dt, rng):
    """wgmma_ws walks a batch's tiles as one run: the rule weighs them as those of one product nb times as tall
    (4 x 768 x 3072 -> 3072 x 3072: 128 x 192 tiles; 8 x 384 x 1024 -> 3072 x 1024: 192 x 128), on this GPU's
    multiprocessors; each product right against float64 (a float32 result: FP32 sums of exact products)."""
    import cupy

    from cumm.runtime.driver import multiprocessors as _sms

    sms = _sms(cupy.cuda.Device().id)
    for nb, M, N in ((4, 768, 3072), (8, 384, 1024), (3, 100, 200)):
        K = 72
        a = rng.standard_normal((nb, M, K), dtype="float32").astype(_dtype(dt))
        b = rng.standard_normal((nb, K, N), dtype="float32").astype(_dtype(dt))
        out = cupy.full((nb, M, N), math.nan, dtype=cupy.float32)
        cumm.matmul(a, b, kernel=untuned, out=out)
        ref = a.astype(cupy.float32).astype(cupy.float64) @ b.astype(cupy.float32).astype(cupy.float64)
        assert _err(out, ref) < 1e-5, (nb, M, N)
        want = SPEC.shape_config(CFG, nb * M, N, K, sms)
        ran = decision(a, b, out, kernel=untuned)
        for k, v in want.items():
            assert f"{k}={v}" in ran, (nb, M, N, ran, want)
        if not want:
            assert "BN=192" not in ran and "WGS=3" not in ran, ran
        cumm.matmul(a, b, kernel=untuned, out=out, config=dict(BN=256))  # a given configuration runs as given
        given = decision(a, b, out, kernel=untuned, config=dict(BN=256))
        assert given and "BN=192" not in given and "WGS=3" not in given, given
