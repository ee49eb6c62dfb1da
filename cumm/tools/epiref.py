"""The float64 reference of an epilogue for ``cumm check`` and ``cumm bench``: cumm cannot run a user's CUDA
snippet on the host, so the user gives its meaning as a reference (a Python callable, or an expression) over
``v`` (alpha * A @ B, float64), ``row`` ((M, 1) indices) and ``col`` ((1, N)), with ``cp`` (cupy), ``exp``,
``tanh``, ``erf``, ``sqrt``, ``maximum`` at hand: the snippet ``v = v / (1.0f + __expf(-v));`` has the reference
``"v / (1 + exp(-v))"``. A named ``activation`` needs none."""

from __future__ import annotations

import math
from collections.abc import Callable

from ..plan.epilogue import ACTIVATIONS


def _named(activation: str) -> Callable:
    import cupy
    from cupyx.scipy.special import erf

    return {
        "relu": lambda v: cupy.maximum(v, 0.0),
        "gelu": lambda v: 0.5 * v * (1.0 + erf(v / math.sqrt(2.0))),
        "gelu_tanh": lambda v: 0.5 * v * (1.0 + cupy.tanh(math.sqrt(2.0 / math.pi) * (v + 0.044715 * v**3))),
        "silu": lambda v: v / (1.0 + cupy.exp(-v)),
    }[activation]


def check_args(epilogue: str | None, activation: str | None, reference) -> None:
    """ValueError / TypeError (before the GPU is touched) for arguments that cannot be verified."""
    if activation is not None and activation not in ACTIVATIONS:
        raise ValueError(f"activation={activation!r}; it must be one of {sorted(ACTIVATIONS)} or None")
    if epilogue is not None and reference is None:
        raise ValueError(
            "an epilogue snippet needs a reference to be verified against float64: a callable or expression over "
            "v, row, col (e.g. reference='v / (1 + exp(-v))' for 'v = v / (1.0f + __expf(-v));')"
        )
    if reference is not None and not (callable(reference) or isinstance(reference, str)):
        raise TypeError(f"reference must be a callable (v, row, col) -> array or a str expression, got {reference!r}")
    if isinstance(reference, str):
        compile(reference, "<reference>", "eval")  # a SyntaxError now, not after the compile


def transform(activation: str | None, reference) -> Callable | None:
    """f(v, row, col) -> the epilogue's float64 result (activation first, then the snippet's reference); None when
    there is no epilogue."""
    if activation is None and reference is None:
        return None
    import cupy
    from cupyx.scipy.special import erf

    act = _named(activation) if activation is not None else None
    if isinstance(reference, str):
        code = compile(reference, "<reference>", "eval")
        names = dict(cp=cupy, exp=cupy.exp, tanh=cupy.tanh, erf=erf, sqrt=cupy.sqrt, maximum=cupy.maximum)

        def ref(v, row, col):
            return eval(code, {"__builtins__": {}}, dict(names, v=v, row=row, col=col))  # the user's own expression

    else:
        ref = reference

    def f(v, row, col):
        if act is not None:
            v = act(v)
        return ref(v, row, col) if ref is not None else v

    return f


def apply(f: Callable, v):
    """``f`` over ``v`` (..., M, N) with row and col broadcast."""
    import cupy

    M, N = v.shape[-2:]
    row = cupy.arange(M, dtype=cupy.float64)[:, None]
    col = cupy.arange(N, dtype=cupy.float64)[None, :]
    return f(v, row, col)
