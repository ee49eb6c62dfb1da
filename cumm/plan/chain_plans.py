"""Planning a fused chain's launch: the configuration a call runs, its grid, its arguments, cached per shape.

Two kinds of chain kernels (``KernelSpec.persistent``):

* ``fused3``: a cluster of blocks per row panel of the result, T = A @ B kept in shared memory. Without
  clusters (compute capability < 9.0) one block computes a whole row panel: same tiles, CL = 1, and CL * PCH
  slices per block so that a chunk of T stays as wide as with a cluster (:func:`no_cluster`).
* ``fused3_tc`` and ``fused3_wg``: one persistent launch of at most the blocks the GPU holds at once (so the
  grid barrier between the two phases cannot hang), T through a scratch array in L2. The scratch array and
  the barrier's word are kept per stream: launches on one stream run in order (a PDL launch waits for its
  predecessor before touching either), so they share the (self-resetting) word and the scratch.
"""

from __future__ import annotations

from collections.abc import Mapping

import cupy

from ..ladder import get_spec
from ..runtime import launch as _launch
from ..runtime.compile import device_kernel
from ..runtime.launch import Launch, layout, pdl_safe, resident_blocks
from ..runtime.tmaps import MapSpec
from .operands import INT32_MAX, compute_capability, row_major

LAUNCH_CACHE_MAX = 4096
SCRATCH_CACHE_MAX = 64 << 20  # scratch up to this size is kept per stream between calls; larger from the pool


def no_cluster(cfg: Mapping[str, int]) -> dict[str, int]:
    """fused3's configuration without clusters: CL = 1, the cluster's slices of T in one block."""
    return dict(cfg, CL=1, PCH=cfg["CL"] * cfg["PCH"])


def cp_async_config(cfg: Mapping[str, int]) -> dict[str, int]:
    """The fused3_wg configuration that runs chains with an unaligned operand in place of ``cfg`` (TMA = 1):
    cp.async copies, in chunks of at most 32 of K (that k-loop spills with 64), as many bytes in flight; K
    split over a cluster where ``cfg`` splits it over K groups of one block (KW), if such a cluster is valid;
    C split chunk by chunk (PC = 0: PC = 1 copies it with the copy engine); three wgmma of N = BN per k-step
    (MN = 0: with MN = 1 the cp.async k-loop spills).
    K groups are correct with cp.async too (tested), but there compute-sanitizer's racecheck reports hazards
    that it also reports on a minimal correct kernel with the same barrier pattern (docs/chain.md), so it could
    not check this path; the cluster form it checks clean."""
    bk, kw, cl = min(cfg["BK"], 32), cfg.get("KW", 1), cfg.get("CL", 1)
    out = {**cfg, "TMA": 0, "PC": 0, "MN": 0, "BK": bk, "STAGES": cfg["STAGES"] * cfg["BK"] // bk}
    if kw == 1 or cl * kw > 8 or cfg["BM"] % (cl * kw):  # (clusters of at most 8; each rank stores BM / CL rows)
        return out
    return {**out, "KW": 1, "CL": cl * kw}


def tensor_maps(cfg: Mapping[str, int], ints: tuple[int, ...]) -> tuple[MapSpec, ...]:
    """The tensor-map arguments of a configuration with TMA = 1 (fused3_wg's CUMM_WG_ARGS: A, B, T, C) for
    ints = (m, k, p, n, lda, ldb, ldc, lde, ldt); () without TMA. The launch's pointers are (A, B, C, E, T,
    bar)."""
    if not cfg.get("TMA"):
        return ()
    m, k, p, n, lda, ldb, ldc, _, ldt = ints
    bm, bn, bk = cfg["BM"], cfg["BN"], cfg["BK"]
    # X's boxes: a row is one swizzle span (BK = 64: two boxes of 32 columns; the spec allows only these BK)
    span = min(bk, 32)
    swizzle = {8: 1, 16: 2, 32: 3}[span]
    return (
        MapSpec(0, k, m, lda, span, bm, swizzle),
        MapSpec(1, p, k, ldb, bn, bk, 0),
        MapSpec(4, p, m, ldt, span, bm, swizzle),
        MapSpec(2, n, p, ldc, bn, bk, 0),
    )


def operands(a, b, c, out):
    """Row-major operands of a fused chain, their leading dimensions, alignment flags (VEC_C covers C and E)
    and data pointers."""
    a, lda = row_major(a, "arrays[0]", copy_ok=True)
    b, ldb = row_major(b, "arrays[1]", copy_ok=True)
    c, ldc = row_major(c, "arrays[2]", copy_ok=True)
    e, lde = row_major(out, "out", copy_ok=False)
    if max(lda, ldb, ldc, lde) > INT32_MAX:
        raise ValueError(f"leading dimensions must be below 2**31, got {lda}, {ldb}, {ldc}, {lde}")
    pa, pb, pc, pe = a.data.ptr, b.data.ptr, c.data.ptr, e.data.ptr
    flags = (
        int(pa % 16 == 0 and lda % 4 == 0),
        int(pb % 16 == 0 and ldb % 4 == 0),
        int(pc % 16 == 0 and ldc % 4 == 0 and pe % 16 == 0 and lde % 4 == 0),
    )
    return (a, b, c, e), (lda, ldb, ldc, lde), flags, (pa, pb, pc, pe)


# Per (kernel, configuration, alignment flags, device, dimensions and leading dimensions): the Launch.
_launches: dict[tuple, Launch] = {}


def resolve(kernel: str, config: str | Mapping[str, int], flags: tuple[int, int, int], cc: int) -> dict[str, int]:
    """The configuration that runs: ``config`` (a name of the spec's ``configs``, or a mapping) for ``cc``, in its
    cluster-free form below compute capability 9.0 (a named fused3 configuration), in its cp.async form where an
    operand is not 16-byte aligned (TMA = 1)."""
    spec = get_spec(kernel)
    over = dict(spec.configs[config]) if isinstance(config, str) and config in spec.configs else config
    if not spec.persistent and cc < 90 and isinstance(config, str):
        over = no_cluster(over)
    cfg = spec.resolve(over, cc)
    if cfg.get("TMA") and not all(flags):  # the copy engine reads 16-byte aligned operands only
        cfg = spec.resolve(cp_async_config(cfg), cc)
    return cfg


def plan(
    kernel: str, config: str | Mapping[str, int], flags: tuple[int, int, int], dev: int, ints: tuple[int, ...]
) -> Launch:
    """The launch of chain kernel ``kernel`` with ``config`` for ints = (m, k, p, n, lda, ldb, ldc, lde);
    cached."""
    key = (kernel, config if isinstance(config, str) else tuple(sorted(config.items())), flags, dev, ints)
    hit = _launches.get(key)
    if hit is not None:
        return hit
    spec = get_spec(kernel)
    cc = compute_capability(dev)
    spec.check_cc(cc, f"device {dev}", "use kernel='fused3' or 'pairwise'")
    cfg = resolve(kernel, config, flags, cc)
    kern = device_kernel(spec, cfg, flags, dev)
    threads, smem = spec.block(cfg)[0], spec.smem(cfg)
    m, k, p, n = ints[:4]
    if len(_launches) >= LAUNCH_CACHE_MAX:
        _launches.clear()
    if not spec.persistent:
        hit = _launches[key] = Launch(kern, spec.grid(cfg, m, n, p)[0], threads, smem, layout(ints))
        return hit
    with cupy.cuda.Device(dev):
        resident = resident_blocks(kern, cfg, threads, smem)
    if resident < 1:  # cannot happen for a configuration that compiled and fits; never launch into a hang
        raise RuntimeError(f"{kernel} with {cfg}: no block (or cluster) fits on device {dev}")
    grid = min(spec.grid(cfg, m, n, p)[0], resident)  # all blocks resident: the barrier cannot hang
    ldt = -(-p // 4) * 4  # T's rows padded to 16 bytes: phase 2 reads T with 16-byte copies
    hit = _launches[key] = Launch(
        kern,
        grid,
        threads,
        smem,
        (*layout((*ints, ldt)), None),
        4 * m * ldt,
        pdl=_launch.PDL and cc >= 90 and pdl_safe(cfg.get("CL", 1), grid, resident),
        maps=tensor_maps(cfg, (*ints, ldt)),
        persistent=True,
    )
    return hit


# Per (device, stream): [the stream (held, so that its handle is not reused while cached), the barrier's word
# (two uint32 that grid_barrier.cuh reads as one 8-byte word; the pool aligns to 512 bytes), the scratch
# buffer, the word's address].
_streams: dict[tuple[int, int], list] = {}


def run(launch: Launch, dev: int, pointers: tuple[int, ...]) -> None:
    """Queue ``launch`` on ``dev``'s current stream (pointers: A, B, C, E); a persistent kernel gets that
    stream's barrier word and scratch T."""
    if dev != cupy.cuda.runtime.getDevice():
        with cupy.cuda.Device(dev):
            run(launch, dev, pointers)
        return
    stream = cupy.cuda.get_current_stream()
    sp = stream.ptr
    if not launch.persistent:
        launch(pointers, sp)
        return
    state = _streams.get((dev, sp))
    if state is None:
        bar = cupy.zeros(2, dtype=cupy.uint32)
        state = _streams[(dev, sp)] = [stream, bar, None, bar.data.ptr]
    nbytes = launch.scratch
    if nbytes <= SCRATCH_CACHE_MAX:
        t = state[2]
        if t is None or t.mem.size < nbytes:
            state[2] = None  # back to the pool first
            t = state[2] = cupy.cuda.alloc(nbytes)
    else:
        t = cupy.cuda.alloc(nbytes)  # freed into the pool (stream-ordered) after the launch is queued
    launch((*pointers, t.ptr, state[3]), sp)


def fused(a, b, c, out, kernel: str, config: str | Mapping[str, int], dev: int) -> tuple[Launch, tuple]:
    """E = a @ b @ c into ``out`` with chain kernel ``kernel``; arguments already checked, every dimension >= 1.
    Returns the launch and the row-major operands it ran on (copies where an input was not row-major)."""
    m, k = a.shape
    p, n = c.shape
    ops, (lda, ldb, ldc, lde), flags, pointers = operands(a, b, c, out)
    launch = plan(kernel, config, flags, dev, (m, k, p, n, lda, ldb, ldc, lde))
    run(launch, dev, pointers)
    return launch, ops
