"""The order of a chain of products: the parenthesization with the fewest multiply-adds.

The classic O(N^3) dynamic program, as numpy's ``multi_dot`` uses.
"""

from __future__ import annotations

from collections.abc import Sequence


def chain_cost(dims: Sequence[int]) -> tuple[int, list[list[int]]]:
    """Least multiply-add count of the chain whose i-th matrix is dims[i] x dims[i + 1], and the split table:
    split[i][j] = s means the best order for matrices i..j multiplies (i..s) by (s+1..j)."""
    nmat = len(dims) - 1
    cost = [[0] * nmat for _ in range(nmat)]
    split = [[0] * nmat for _ in range(nmat)]
    for span in range(1, nmat):
        for i in range(nmat - span):
            j = i + span
            best = None
            for s in range(i, j):
                q = cost[i][s] + cost[s + 1][j] + dims[i] * dims[s + 1] * dims[j + 1]
                if best is None or q < best:
                    best, split[i][j] = q, s
            cost[i][j] = best
    return (cost[0][nmat - 1] if nmat else 0), split


def chain_order(dims: Sequence[int]):
    """The cheapest parenthesization as nested pairs of matrix indices, e.g. ((0, 1), 2)."""
    _, split = chain_cost(dims)

    def build(i, j):
        return i if i == j else (build(i, split[i][j]), build(split[i][j] + 1, j))

    return build(0, len(dims) - 2)
