"""The float64 reference of an epilogue for ``cumm check`` and ``cumm bench``: cumm cannot run a user's CUDA
snippet on the host, so the user gives its meaning as a reference (a Python callable, or an expression) over
``v`` (alpha * A @ B, float64), ``row`` ((M, 1) indices) and ``col`` ((1, N)), with ``cp`` (cupy), ``exp``,
``tanh``, ``erf``, ``sqrt``, ``maximum`` at hand: the snippet ``v = v / (1.0f + __expf(-v));`` has the reference
``"v / (1 + exp(-v))"``. A named ``activation`` needs none."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence

from ..plan.epilogue import ACTIVATIONS


def _named(activation: str, xp=None) -> Callable:
    """The activation in float64 over arrays of ``xp`` (cupy, the default, or numpy: a CPU can check it)."""
    if xp is None:
        import cupy as xp
    if xp.__name__ == "cupy":
        from cupyx.scipy.special import erf
    else:
        erf = xp.vectorize(math.erf, otypes=[xp.float64])

    return {
        "relu": lambda v: xp.maximum(v, 0.0),
        "gelu": lambda v: 0.5 * v * (1.0 + erf(v / math.sqrt(2.0))),
        "gelu_tanh": lambda v: 0.5 * v * (1.0 + xp.tanh(math.sqrt(2.0 / math.pi) * (v + 0.044715 * v**3))),
        "silu": lambda v: v / (1.0 + xp.exp(-v)),
    }[activation]


def glu_pair(glu: str, gate, up):
    """glu='s value in float64 before the rest of the epilogue: act(gate) * up, gate = alpha * x @ w1 and
    up = alpha * x @ w3 (cupy or numpy arrays)."""
    import numpy

    xp = numpy if isinstance(gate, numpy.ndarray) else None
    return _named(glu, xp)(gate) * up


def check_glu(
    glu: str | None,
    dtypes: Sequence[str],
    kernels: Sequence[str] | None = None,
    shapes: Iterable[Sequence[int]] | None = None,
) -> None:
    """ValueError, before the GPU is touched, for a ``glu=`` that cumm check / bench cannot run: not an
    activation's name, a dtype no glu= rung takes, a named rung without ``KernelSpec.glu``, a shape whose N (C's
    columns; B has 2N) breaks glu='s pairing rule. Each message is matmul's own (cumm/plan/epilogue.py, routes.py,
    cumm/plan/operands.py glu_columns)."""
    if glu is None:
        return
    from types import SimpleNamespace

    from ..ladder import get_spec
    from ..plan import epilogue as _epilogue
    from ..plan import routes as _routes
    from ..plan.operands import glu_columns

    _epilogue.check_glu_name(glu)
    rungs = _routes.glu_rungs()
    takes = sorted({d for n in rungs for d in get_spec(n).dtypes})
    for k in kernels or ():
        if k != "auto" and not get_spec(k).glu:
            _routes.glu_route(k, False, takes[0], 90, False)  # raises: the rungs that do
    for d in dtypes:
        if d not in takes:
            raise ValueError(f"{_routes.glu_unsupported(d)}: pass dtype {' or '.join(map(repr, takes))}")
    for s in shapes or ():
        M, N, K = s
        try:
            glu_columns(SimpleNamespace(ndim=2, shape=(K, 2 * N)), 2 * N)
        except ValueError as e:
            where = f"shape {M}x{N}x{K} with glu= (N = {N} is C's width, B has 2N = {2 * N} columns)"
            raise ValueError(f"{where}: {e}") from None


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

        # The user's own expression, with no builtins but __import__: an extension module that imports lazily
        # from C (PyImport_Import) looks __import__ up in the builtins of the frame it runs in, this one (CuPy did,
        # compiling an elementwise kernel: KeyError '__import__').
        scope = {"__builtins__": {"__import__": __import__}}

        def ref(v, row, col):
            return eval(code, scope, dict(names, v=v, row=row, col=col))

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
