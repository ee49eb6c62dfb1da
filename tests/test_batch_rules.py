"""Batched products' rules that need no GPU: when a batch times one matrix can run as one product."""

from __future__ import annotations

import numpy as np
import pytest

from cumm.plan.operands import stacks

BASE = np.zeros((6, 4, 10, 12), dtype=np.float32)
VIEWS = {
    "contiguous": BASE,
    "leading batch sliced": BASE[2:5],
    "every other matrix": BASE[:, ::2],
    "rows sliced": BASE[:, :, 1:9],
    "columns sliced": BASE[..., :7],  # rows keep their pitch: still stacked
    "one row each": BASE[:, :, :1],
    "size-1 batch": BASE[:1, 1:2],
    "transposed batch": BASE.transpose(1, 0, 2, 3),
    "broadcast": np.broadcast_to(BASE[:1], (3, 4, 10, 12)),
    "matrices transposed": BASE.transpose(0, 1, 3, 2),
}


@pytest.mark.parametrize("name", VIEWS)
def test_stacks_exactly_when_a_reshape_is_a_view(name):
    x = VIEWS[name]
    view = np.shares_memory(x.reshape(-1, x.shape[-1]), x)  # numpy (and CuPy) reshape without a copy iff possible
    assert stacks(x.shape, x.strides) == view, name
