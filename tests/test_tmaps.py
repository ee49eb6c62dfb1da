"""Tensor-map descriptions (cumm/_tmaps.py) without a GPU: the batched form a batched variant reads."""

from __future__ import annotations

from cumm._tmaps import MapSpec


def test_a_map_over_a_batch_and_a_broadcast_operand():
    m = MapSpec(0, 100, 50, 104, 32, 128, 3)
    assert m.batch == 0  # a 2-D map
    b = m.batched(6, 50 * 104 + 8)
    assert (b.batch, b.batch_stride) == (6, 5208) and b._replace(batch=0, batch_stride=0) == m
    one = m.batched(6, 0)  # the same matrix for every product: a batch of one, read as matrix 0
    assert (one.batch, one.batch_stride) == (1, 50 * 104)
