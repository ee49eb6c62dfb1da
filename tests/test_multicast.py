"""wgmma_ws with CL = 2: clusters of two blocks (two tile rows) that share B by TMA multicast, each block loading
half of B's boxes. cumm picks it where B's rows start off 32 bytes (the spec's pitch_config), which the copy engine
reads in many small requests. The rules are checked on the CPU (the override, the constraints, stream-K's
workspace counted in clusters, offline compiles); on the GPU, whole tiles and stream-K against float64 on odd
shapes, the call's decision, and a named configuration left as given."""

from __future__ import annotations

import math

import pytest

import cumm
from cumm.api.decision import decision

from .test_half import _dtype

SPEC = cumm.kernel_spec("wgmma_ws")
CFG = SPEC.default_config(90)


@pytest.mark.parametrize(
    "pitch_b, want",
    [(2 * 3000, {"CL": 2}), (2 * 4104, {"CL": 2}), (2 * 3072, {}), (2 * 3008, {}), (2 * 4000, {})],
)
def test_multicast_where_b_rows_start_off_32_bytes(pitch_b, want):
    assert SPEC.pitch_config(CFG, 2 * 4096, pitch_b) == want


def test_multicast_only_for_two_consumer_warpgroups():
    one = {**CFG, "WGS": 1, "NUM_THREADS": 256, "BM": 64, "SK": 0}
    assert SPEC.pitch_config(one, 8192, 6000) == {}
    # an odd count of 64-column B boxes: the first block of the pair loads one more
    assert SPEC.pitch_config({**CFG, "BN": 192}, 8192, 6000) == {"CL": 2}
    assert SPEC.pitch_config({**CFG, "BN": 64}, 8192, 6000) == {"CL": 2}
    assert SPEC.pitch_config({**CFG, "BM": 256, "BN": 128}, 8192, 6000) == {"CL": 2}
    assert SPEC.pitch_config(CFG, 2 * 3000, 2 * 4096) == {}  # A's rows off 32 bytes: not multicast (B is shared)


def test_cluster_constraints_say_what_is_allowed():
    with pytest.raises(cumm.ConfigError, match="CL is 1, or 2"):
        cumm.compile("wgmma_ws", dict(CL=4), arch="sm_90a")
    with pytest.raises(cumm.ConfigError, match="CL is 1, or 2"):
        cumm.compile("wgmma_ws", dict(CL=0), arch="sm_90a")


def test_stream_k_workspace_counts_clusters():
    """With CL = 2 the kernel hands out tile pairs to clusters: the last wave is measured in pairs and clusters,
    and every block (both of a cluster) keeps its own partial sums."""
    cl2 = {**CFG, "CL": 2}
    want = 4096 * 4 + 132 * CFG["BM"] * CFG["BN"] * 4
    # 2048 x 3000: 8 pairs of tile rows x 12 columns = 96 pairs on 66 clusters, the last wave 0.45 full
    assert SPEC.workspace(cl2, 2048, 3000, 4096, 132) == want
    # 5632 x 3072: 22 pairs of tile rows x 12 columns = 264 pairs, four whole waves of 66 clusters
    assert SPEC.workspace(cl2, 5632, 3072, 4096, 132) == 0
    assert SPEC.workspace(CFG, 5632, 3072, 4096, 132) == 0  # and 528 tiles, four waves of 132 blocks
    # 4224 x 4096: 528 tiles (four whole waves of blocks) but 17 pairs x 16 = 272 pairs (the last row a half pair)
    assert SPEC.workspace(CFG, 4224, 4096, 4096, 132) == 0 and SPEC.workspace(cl2, 4224, 4096, 4096, 132) == want
    assert SPEC.workspace({**cl2, "SK": 0}, 2048, 3000, 4096, 132) == 0


def test_clusters_compile_without_spills():
    for over in (dict(CL=2), dict(CL=2, SK=0), dict(CL=2, BM=256, BN=128), dict(CL=2, BN=192), dict(CL=2, BN=64)):
        k = cumm.compile("wgmma_ws", over, arch="sm_90a")
        assert k.spill_bytes == 0 and k.registers == 168, (over, k)


# --- on the GPU ---

HALF = ("float16", "bfloat16")
# (M, N, K, ldb): B a view whose rows are ldb elements apart. One tile, primes, an odd last tile row (its pair's
# other tile lies past M), K = 7, M = 1, and stream-K tails (2000 x 3000 x 4000: 96 pairs on 66 clusters; 1000 x 1000
# x 2000: fewer pairs than clusters, each pair's slabs shared).
SHAPES = [
    (1, 1, 1, 8),
    (127, 131, 137, 136),
    (4097, 264, 7, 264),
    (1, 4104, 520, 4104),
    (300, 1000, 72, 1000),
    (2000, 3000, 4000, 3000),
    (1000, 1000, 2000, 1000),
    (2112, 4000, 2056, 4008),
]


def _operands(rng, M, N, K, ldb, dt):
    """A (rows on 16 bytes: a view when K % 8 != 0) and B, a view whose rows are ldb elements apart."""
    import cupy

    lda = -(-K // 8) * 8
    a = rng.standard_normal((M, lda), dtype=cupy.float32).astype(_dtype(dt))[:, :K]
    b = rng.standard_normal((K, ldb), dtype=cupy.float32).astype(_dtype(dt))[:, :N]
    return a, b


def _err(c, a, b) -> float:
    import cupy

    ref = a.astype(cupy.float64) @ b.astype(cupy.float64)
    return float(cupy.linalg.norm(c.astype(cupy.float64) - ref)) / max(float(cupy.linalg.norm(ref)), 1e-30)


@pytest.mark.gpu
@pytest.mark.usefixtures("sm90")
@pytest.mark.parametrize("dt", HALF)
@pytest.mark.parametrize("sk", [0, 4])
@pytest.mark.parametrize("bn", [256, 192, 64])  # 4, 3 and 1 B boxes: with an odd count the first block loads more
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_clusters_of_two_against_float64(shape, bn, sk, dt, rng):
    import cupy

    M, N, K, ldb = shape
    a, b = _operands(rng, M, N, K, ldb, dt)
    cfg = dict(BN=bn, CL=2, SK=sk)
    want = "wgmma_ws" + (f" BN={bn}" if bn != 256 else "") + " CL=2" + (" SK=0" if sk == 0 else "")
    for _ in range(3):  # stream-K's flags are lowered by each launch: later launches find them so
        out = cupy.full((M, N), math.nan, dtype=cupy.float32)
        cumm.matmul(a, b, kernel="wgmma_ws", config=cfg, out=out)
        assert decision(a, b, out, kernel="wgmma_ws", config=cfg) == want
        # FP32 accumulation of products exact in FP32: only the order of the sums differs
        assert _err(out, a, b) < 1e-5, (shape, sk)
    half = cumm.matmul(a, b, kernel="wgmma_ws", config=cfg)  # a half result through the TMA-store epilogue
    assert half.dtype == a.dtype and _err(half, a, b) < 5e-3


@pytest.mark.gpu
@pytest.mark.usefixtures("sm90")
@pytest.mark.parametrize("dt", HALF)
def test_cumm_multicasts_b_rows_off_32_bytes(dt, rng):
    """kernel="auto" and the named rung without a configuration take CL = 2 for B with a pitch of 3000 halves;
    a pitch of 3072, a configuration given, and a transposed B (read in place) keep CL = 1."""
    import cupy

    M, N, K = 2000, 3000, 4000
    a, b = _operands(rng, M, N, K, N, dt)
    for kernel in ("auto", "wgmma_ws"):
        out = cupy.full((M, N), math.nan, dtype=a.dtype)
        cumm.matmul(a, b, kernel=kernel, out=out)
        assert "CL=2" in decision(a, b, out, kernel=kernel), kernel
        assert _err(out, a, b) < 5e-3
    a2, b2 = _operands(rng, M, N, K, 3072, dt)
    bt = cupy.ascontiguousarray(b.T).T  # column-major B: read in place, one block a tile
    for x, y, cfg in ((a2, b2, None), (a, b, dict(CL=1)), (a, bt, None)):
        out = cupy.full((M, N), math.nan, dtype=a.dtype)
        cumm.matmul(x, y, kernel="wgmma_ws", config=cfg, out=out)
        ran = decision(x, y, out, kernel="wgmma_ws", config=cfg)
        assert ran.startswith("wgmma_ws") and "CL=2" not in ran, ran
        assert _err(out, x, y) < 5e-3


@pytest.mark.parametrize("flags", [(1, 1, 1, 1, 2), (1, 1, 1, 0, 2, 2)], ids=["batched", "transposed_b"])
def test_clusters_refuse_batches_and_transposed_operands_by_name(flags):
    """CL = 2 is a configuration of 2-D row-major products: the batched variant and a transposed B (read in place)
    fail to compile with a message that says to use CL = 1 (cumm itself never picks CL = 2 for them)."""
    from cumm.runtime.compile import compile_offline

    with pytest.raises(cumm.CompileError, match="run CL = 1"):
        compile_offline(SPEC, SPEC.resolve(dict(CL=2), 90), "sm_90", flags)
