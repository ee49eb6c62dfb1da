"""Every decision of a matmul call, made once per key: :func:`decide` turns checked operands (a 2-D product or a
batch) into a :class:`~cumm.runtime.launch.Call`.

In order: the facts of the operands, nothing copied (how a rung that reads row-major matrices and one that reads
transposed views in place would read each, and whether the copy engine can: ``operands.operand_layouts``); then
every choice from them: the kernel and its configuration (``auto``'s choice, or the named rung with its tuned or
small tiles: :func:`_choose`), operands the copy engine cannot read (copied into rows it reads, or handed to the
rung's fallback), the spec's shape and pitch rules on a configuration cumm chose (``KernelSpec.adjusted``), the
float32 machinery (padded copies, split count, a staged output); then the operands laid out as chosen
(``repack.lay_out``); then the compile variant (:class:`~cumm.runtime.render.Variant`), the compiled kernel
(:class:`Plan`), and the edge strips.
"""

from __future__ import annotations

import math

from ..ladder import REGISTRY
from ..runtime.driver import multiprocessors
from ..runtime.launch import Call
from ..runtime.render import TRANSPOSED_A, TRANSPOSED_B, Variant, dtype_flag
from . import auto as _auto
from . import edges as _edges
from . import pieces as _pieces
from . import repack as _repack
from . import routes as _routes
from . import splitk as _splitk
from .operands import INT32_MAX, compute_capability, operand_layouts, row_major, shares, span
from .plan import NOT_GEMM, gemm_kernels_list, plan_for


def _out_operand(out, batch: tuple[int, ...], M: int, N: int):
    """(3-D view of out, its leading dimension, its batch stride): out is written in place, so it must be a view of
    row-major matrices (a 2-D product: any row-major view; a batch: one stride per matrix as well)."""
    if not batch:
        c, ldc = row_major(out, "out", copy_ok=False)
        return c.reshape(1, M, N), ldc, 0
    c3 = out.reshape(math.prod(batch), M, N)
    s0, s1, s2 = c3.strides
    oi = c3.dtype.itemsize
    if not (s2 == oi or N <= 1) or not shares(c3, out) or s1 % oi or s0 % oi or (M > 1 and s1 // oi < N):
        raise ValueError(
            f"out must be C-contiguous (row-major with unit column stride) for a batched product; got "
            f"strides {out.strides} for shape {out.shape}"
        )
    return c3, max(s1 // oi if M > 1 else N, N, 1), s0 // oi  # (one row: its stride is never used)


def _readable_by(x3, ld: int, bs: int) -> int:
    """1 when the copy engine (and 16-byte loads) can read every matrix of ``x3``: each matrix and each row starts
    on 16 bytes."""
    item = x3.dtype.itemsize
    return int(x3.data.ptr % 16 == 0 and ld * item % 16 == 0 and bs * item % 16 == 0)


def _choose(spec, config, split_k, dtype: str, M: int, N: int, K: int, dev: int, batched: int = 0):
    """(kernel name, configuration or None, split_k) for a product of ``dtype``: auto's choice (``spec`` None), or
    the named rung (which must take that dtype) with its tuned or small tiles when no configuration is given."""
    if spec is None:
        return _auto.select(M, N, K, dev, config, split_k, batched, dtype)
    kernel = spec.name
    if dtype not in spec.dtypes:
        takes = [n for n in gemm_kernels_list() if dtype in REGISTRY[n].dtypes]
        raise TypeError(
            f"kernel {kernel!r} multiplies {' and '.join(spec.dtypes)} arrays, not {dtype}; the rungs for "
            f"{dtype}: {takes or 'none yet'} (or kernel='auto')"
        )
    if config is None:  # a named rung fits the problem: its tuned entry, or tiles that fill the GPU
        config = _auto.named(kernel, M, N, K, dev, max(1, batched), dtype)
    return kernel, config, split_k


def decide(a, b, out, batch, spec, config, split_k, beta, dev, akind, epilogue=None) -> tuple[Call, tuple] | None:
    """Every decision for this call's key, for a 2-D product (``batch`` is ()) and a batch alike: the Call and the
    operands it runs on (2-D arrays for a product, 3-D for a batch). ``spec``: the named rung's, resolved once by
    the caller (None: kernel="auto"); the rungs chosen here are registry entries. None when auto chose, for a
    batch, a rung without batched variants: the caller runs the products one at a time. ``epilogue``: a fused
    epilogue (cumm.plan.epilogue.Epilogue), run in one unsplit launch of a rung whose stores take it."""
    M, K = a.shape[-2:]
    N = b.shape[-1]
    nb = math.prod(batch)
    dt, odt = a.dtype.name, out.dtype.name
    fp8 = epilogue is not None and epilogue.fp8  # an FP8 C (out: its bytes): the kernel's C is 16-bit, stored as bytes
    if fp8:
        odt = dt
    half = dt != "float32"
    chosen = config is None  # cumm chooses the configuration (spec.shape_config, pitch_config may adjust it)
    # 1. the facts: how a rung that reads row-major matrices and one that reads transposed views in place would read
    # each operand (nothing copied but a layout neither reads)
    lay_a, lay_b = operand_layouts(a, batch), operand_layouts(b, batch)
    # 2. every choice, from the facts: the kernel, its configuration and split count
    auto, split_arg = spec is None, split_k
    kernel, config, split_k = _choose(spec, config, 1 if batch else split_k, dt, M, N, K, dev, nb if batch else 0)
    rerouted = None  # (with an epilogue, the rung for it should the rung's fallback not take it)
    if epilogue is not None:  # one unsplit launch of a rung whose stores take it (plan/routes.py)
        shape = (nb * M if batch else M, N, K)
        routed, rerouted, tied = _routes.routes(
            kernel, auto, None if batch else split_arg, batch, dt, dev, shape, epilogue
        )
        kernel, config, split_k = routed, config if routed == kernel else tied, None
    spec = REGISTRY[kernel]  # (the caller's rung, or one chosen above: a registered name)
    if half and split_k not in (None, 1):
        raise ValueError(f"split_k={split_k} is for float32 products; {dt} runs unsplit (split_k=None or 1)")
    # the operands' layouts: a transposed view the rung reads in place keeps its layout (its column stride is its
    # ld); any other layout is made row-major (transposed views by a tiled copy); out is written in place
    in_place = spec.reads_transposed and (not batch or spec.batches)
    la, lb = lay_a.rows, lay_b.rows
    if in_place:
        la, lb = lay_a.in_place, lay_b.in_place
    (lda, bsa), (ldb, bsb) = (la.ld, la.bs), (lb.ld, lb.bs)
    c3, ldc, bsc = _out_operand(out, batch, M, N if epilogue is None else epilogue.columns(N))
    if max(lda, ldb, ldc) > INT32_MAX:
        raise ValueError(f"leading dimensions must be below 2**31, got {lda}, {ldb}, {ldc}")
    if batch and spec.kind != "gemm":
        raise ValueError(NOT_GEMM.format(spec.name, gemm_kernels_list()))
    if batch and not spec.batches:
        if auto:
            return None
        able = [n for n in gemm_kernels_list() if REGISTRY[n].batches and dt in REGISTRY[n].dtypes]
        raise ValueError(
            f"kernel {kernel!r} does not run batched products (its template does not start with "
            f"CUMM_BATCH() or CUMM_SPLIT_K, and its spec does not schedule batches); "
            + (
                f"the rungs that do: {able}"
                if able
                else f"no rung runs batched {dt} products in one launch: kernel='auto' runs them one at a time"
            )
        )
    vec = [la.readable, lb.readable, _readable_by(c3, ldc, bsc)]  # (an FP8 C: its bytes on 16 bytes)
    # operands the copy engine cannot read: copied into rows it reads, or the rung's fallback (any alignment). A
    # batch is copied when the fallback runs no batches; a product, where the copy pays (repack.pads_for_...).
    pad_a = pad_b = False
    # a rung that reads the caller's operands through the copy engine (a rung reading pieces reads its own copies)
    copy_engine = spec.tensor_maps is not None and not spec.pieces
    if copy_engine and not (vec[0] and vec[1]):
        if batch:
            pad_a = pad_b = not (spec.fallback is not None and REGISTRY[spec.fallback].batches)
        elif _repack.ENABLED:
            item = a.dtype.itemsize
            pad_a = not vec[0] and _repack.pads_for_copy_engine(M, N, K, "a", item)
            pad_b = not vec[1] and _repack.pads_for_copy_engine(M, N, K, "b", item)
            if not ((pad_a or vec[0]) and (pad_b or vec[1])):  # one of them goes to the fallback anyway
                pad_a = pad_b = False
        if epilogue is not None and epilogue.glu:  # copied: no fallback rung's stores pair columns (KernelSpec.glu)
            pad_a = pad_b = True
        pad_a, pad_b = pad_a and not vec[0], pad_b and not vec[1]
        if pad_a:  # (the rows repack.copy_engine_rows makes)
            lda = _repack.copy_engine_ld(K, a.dtype.itemsize)
            bsa = 0 if bsa == 0 or not batch else M * lda
        if pad_b:
            ldb = _repack.copy_engine_ld(N, b.dtype.itemsize)
            bsb = 0 if bsb == 0 or not batch else K * ldb
        if pad_a or pad_b:
            vec[0] = vec[1] = 1
    if copy_engine and not (vec[0] and vec[1]):  # the fallback rung, with its tiles for the shape
        kernel = spec.fallback
        spec, config = REGISTRY[kernel], _auto.named(kernel, M, N, K, dev, nb, dt)
        if epilogue is not None and not spec.epilogue:  # the fallback rung cannot take it: the rung asked above
            if isinstance(rerouted, ValueError):
                raise rerouted
            kernel, config = rerouted, None
            spec = REGISTRY[kernel]
    if (la.transposed or lb.transposed) and not spec.reads_transposed:  # read in place by the first rung only
        la, lb = lay_a.rows, lay_b.rows
        (lda, bsa), (ldb, bsb) = (la.ld, la.bs), (lb.ld, lb.bs)
        vec[:2] = la.readable, lb.readable
    src_lds = (lda, ldb)  # (the operands' own, before a rung reading pieces takes the pieces')
    if spec.pieces:  # the kernel reads FP16 pieces of the operands, made on each call in rows the copy engine reads
        (lda, ldb), vec[0], vec[1] = _pieces.lds(N, K), 1, 1
    layout = (TRANSPOSED_A if la.transposed else 0) | (TRANSPOSED_B if lb.transposed else 0)
    # the spec's shape and pitch rules, on a configuration cumm chose (a batch whose tiles are one run: as one
    # product nb times as tall, as for the tuned lookup)
    if chosen and spec.shape_config is not None and (not batch or spec.schedules_batch):
        config = spec.adjusted(config, compute_capability(dev), spec.shape_config, nb * M, N, K, multiprocessors(dev))
    if chosen and not batch and not layout and spec.pitch_config is not None:
        pitches = lda * a.dtype.itemsize, ldb * b.dtype.itemsize
        config = spec.adjusted(config, compute_capability(dev), spec.pitch_config, *pitches)
    if batch and nb > 65535 and not spec.schedules_batch:  # grid z over the batch
        raise ValueError(
            f"a batch of {nb} products is more than CUDA's 65535 blocks in z (kernel {kernel!r}): split the batch"
        )
    # the float32 rungs that load through registers: padded copies, split-K, a staged output and edge strips. The
    # copy-engine rungs, the half rungs and batches run as one launch.
    plain = half or spec.tensor_maps is not None or bool(batch) or epilogue is not None
    repack_a = repack_b = False
    if _repack.ENABLED and not plain and not (vec[0] and vec[1]):  # scalar loads: a padded copy may pay
        repack_a, repack_b = _repack.repack_plan(spec, M, N, K, bool(vec[0]), bool(vec[1]))
        vec[0], vec[1] = vec[0] or int(repack_a), vec[1] or int(repack_b)
    splits = 1
    if split_k is not None and split_k > 1:  # only the slices that get at least one slab of K
        bk = spec.resolve(config, compute_capability(dev))["BK"]  # (ConfigError for a bad config)
        splits = _splitk.effective_splits(K, split_k, bk)
        if splits > 1:  # the kernel writes to a fresh contiguous workspace (ldc = N), not to out
            vec[2] = int(N % 4 == 0)
    stage = bool(
        _repack.ENABLED
        and not plain
        and not vec[2]
        and splits == 1
        and spec.stage_out
        and _repack.should_stage_out(M, N, K, beta)
    )
    if stage:
        vec[2] = 1
    # 3. the operands laid out as decided: tiled copies of transposed views, rows the copy engine reads
    a3, b3 = _repack.lay_out(la, bool(batch)), _repack.lay_out(lb, bool(batch))
    if pad_a:
        a3 = _repack.pad_rows(a3, bool(batch))
    if pad_b:
        b3 = _repack.pad_rows(b3, bool(batch))
    # 4. the compile variant, the compiled kernel, the edge strips
    plan = plan_for(spec, config, Variant(*vec, int(bool(batch)), dtype_flag(dt, odt), layout, epilogue), dev)
    if batch and spec.schedules_batch and nb * math.prod(spec.grid(plan.cfg, M, N, K)) >= 2**31:
        raise ValueError(f"a batch of {nb} products of {M}x{N}x{K} has 2^31 tiles or more: split the batch")
    mm, nn = M, N
    bm, bn = plan.tile
    strips = 0 < M % bm <= _edges.EDGE_ROWS or 0 < N % bn <= _edges.EDGE_ROWS if bm else False
    if strips and not plain and splits == 1 and _edges.ENABLED:
        mm, nn = _edges.split(M, N, bm, bn, lambda m, n: plan.blocks(m, n, K), plan.slots(dev))
    # copies made of the operands on each call: a layout the rung does not read in place, rows padded
    ab = (("A", a3, a, repack_a or spec.pieces), ("B", b3, b, repack_b or spec.pieces))
    copies = tuple(n for n, x3, x, more in ab if more or not shares(x3, x))
    # fast: the plan's kernel straight on the caller's arrays (no copy, no strips): one driver launch, or with split-K
    # two (the slices into a workspace from the allocator of the launch's stream, then the reduce)
    fast = not (copies or stage) and (mm, nn) == (M, N)
    if fast and not batch:
        grid = plan.spec.grid(plan.cfg, M, N, K)
        fast = grid[1] <= 65535 and grid[2] <= 65535  # (else Plan.launch reports it)
    decisions = {
        "repack_a": repack_a,
        "repack_b": repack_b,
        "splits": splits,
        "stage": stage,
        "mm": mm,
        "nn": nn,
        "pad_a": pad_a,
        "pad_b": pad_b,
        "pieces": spec.pieces,
        "copies": copies + (("C",) if stage else ()),
        # a rung reading pieces made from the caller's own arrays (none laid out anew): their row strides, from
        # which a cached call makes the pieces on the caller's pointers (cumm/plan/pieces.py's splitter)
        "pieces_from": src_lds if spec.pieces and shares(a3, a) and shares(b3, b) else None,
    }
    ops = (a3, b3, c3) if batch else (a3[0], b3[0], c3[0])  # (views: what the launch paths take)
    call = Call(
        plan,
        akind,
        dev,
        (M, N, K),
        (lda, ldb, ldc),
        c3.dtype,
        out.shape,
        (0, 0, 0) if batch else tuple(span(x) for x in ops),
        fast,
        decisions,
        batch=(nb, bsa, bsb, bsc) if batch else None,
        # maps go with the driver launch (Plan.launch has none), and so does an epilogue's CummAlpha
        direct=spec.tensor_maps is not None or epilogue is not None if batch else plain,
        reduce=_splitk.reduce_launch(M, N, dev) if fast and splits > 1 else None,
    )
    return call, ops
