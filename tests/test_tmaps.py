"""Tensor-map descriptions (cumm/runtime/tmaps.py) without a GPU: the batched form a batched variant reads."""

from __future__ import annotations

from cumm.runtime.tmaps import MapSpec


def test_a_map_over_a_batch_and_a_broadcast_operand():
    m = MapSpec(0, 100, 50, 104, 32, 128, 3)
    assert m.batch == 0  # a 2-D map
    b = m.batched(6, 50 * 104 + 8)
    assert (b.batch, b.batch_stride) == (6, 5208) and b._replace(batch=0, batch_stride=0) == m
    one = m.batched(6, 0)  # the same matrix for every product: a batch of one, read as matrix 0
    assert (one.batch, one.batch_stride) == (1, 50 * 104)


def test_l2_promotion_only_for_rows_on_128_byte_boundaries():
    """256-byte L2 promotion where every row starts on a 128-byte boundary; none where the pitch would start box
    rows inside lines (the reads then fetched about twice the sectors: see l2_promotion)."""
    from cumm.runtime.tmaps import l2_promotion

    half = dict(swizzle=3, elem=2, dtype=1)
    assert l2_promotion(MapSpec(1, 5120, 2048, 5120, 64, 64, **half)) == 3  # 10240-byte rows
    assert l2_promotion(MapSpec(1, 5000, 2048, 5000, 64, 64, **half)) == 0  # 10000 = 78 * 128 + 16
    assert l2_promotion(MapSpec(1, 5000, 2048, 5056, 64, 64, **half)) == 3  # padded to a 128-byte pitch
    assert l2_promotion(MapSpec(0, 2000, 3000, 2000, 64, 128, **half)) == 0  # 4000-byte rows
    assert l2_promotion(MapSpec(0, 4096, 64, 4100, 32, 128, 3)) == 0  # float32, 16400-byte rows
    assert l2_promotion(MapSpec(0, 4096, 64, 4096, 32, 128, 3)) == 3


def test_transposed_operands_get_maps_in_their_own_layout():
    """wgmma_ws's maps of a column-major A (dims M x K, boxes 64 x 64) and B (dims K x N, boxes 64 x 64), their
    column strides as ld; row-major operands keep theirs."""
    from cumm.ladder import REGISTRY
    from cumm.runtime.render import TRANSPOSED_A, TRANSPOSED_B

    spec = REGISTRY["wgmma_ws"]
    assert spec.reads_transposed and not REGISTRY["wgmma"].reads_transposed
    cfg = spec.resolve({}, 90)
    M, N, K = 300, 1000, 520
    row = spec.tensor_maps(cfg, M, N, K, 520, 1000, 1000, True)
    a, b, c = spec.tensor_maps(cfg, M, N, K, 304, 520, 1000, True, layout=TRANSPOSED_A | TRANSPOSED_B)
    assert (a.cols, a.rows, a.ld, a.box_cols, a.box_rows) == (M, K, 304, 64, 64)
    assert (b.cols, b.rows, b.ld, b.box_cols, b.box_rows) == (K, N, 520, 64, 64)
    assert c == row[2]
    assert spec.tensor_maps(cfg, M, N, K, 520, 520, 1000, True, layout=TRANSPOSED_B)[0] == row[0]
