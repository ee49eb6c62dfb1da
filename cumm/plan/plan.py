"""Every decision of a matmul call, made once per key: :func:`decide` (a 2-D product) and
:func:`decide_batched` (a batch) turn checked operands into a :class:`~cumm.runtime.launch.Call`.

In order: the kernel and its configuration (``auto``'s choice, or the named rung with its tuned or small tiles:
:func:`_choose`), the operands' layout (a transposed view a rung reads in place, else a row-major view or copy),
the rung that can read them (a copy-engine rung hands operands it cannot read to its fallback rung:
:func:`_readable`), the spec's shape and pitch rules on a configuration cumm chose (:func:`_adjusted`), the
copies of unaligned operands (repacked or padded for the copy engine), the split count, the staging of an
unaligned output, the compile variant (alignment, batch, dtype and layout flags), the compiled kernel
(:class:`Plan`), and the edge strips. :func:`run` carries out a call that is more than one launch.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import cupy
import numpy as np

from ..core.dtypes import F32
from ..ladder import REGISTRY, get_spec
from ..runtime.compile import device_kernel
from ..runtime.driver import cluster_width, max_active_clusters
from ..runtime.launch import Call
from ..runtime.render import TRANSPOSED_A, TRANSPOSED_B, dtype_flag, layout_of, supports_batch
from . import auto as _auto
from . import edges as _edges
from . import epilogue as _epi
from . import repack as _repack
from . import splitk as _splitk
from .operands import INT32_MAX, aligned, compute_capability, row_major, shares, span


class Plan:
    """One compiled kernel configuration (for one set of alignment flags, on one device) and its geometry."""

    __slots__ = ("spec", "cfg", "kern", "flags", "block", "smem", "tile", "_slots")

    def __init__(self, spec, cfg, kern, flags=(1, 1, 1)):
        self.spec, self.cfg, self.kern, self.flags = spec, cfg, kern, flags
        self.block = spec.block(cfg)
        self.smem = spec.smem(cfg)
        self.tile = (cfg["BM"], cfg["BN"]) if "BM" in cfg and "BN" in cfg else (0, 0)  # (0, 0): no strips
        self._slots = None

    def slots(self, device_id: int) -> int:
        """Blocks of this kernel resident at once on the device (occupancy API x multiprocessors): a wave. For a
        kernel compiled with clusters of w > 1 blocks, w x the clusters resident at once (a cluster's blocks share
        a GPC, and a GPC with an odd number of free multiprocessors leaves one idle)."""
        if self._slots is None:
            from cupy_backends.cuda.api import driver

            threads = self.block[0] * self.block[1] * self.block[2]
            with cupy.cuda.Device(device_id):
                func = self.kern.kernel.ptr
                width = cluster_width(func)
                if width > 1:
                    self._slots = width * max_active_clusters(func, width, threads, self.smem)
                else:
                    per_sm = driver.occupancyMaxActiveBlocksPerMultiprocessor(func, threads, self.smem)
                    self._slots = per_sm * _auto._sms(device_id)
        return self._slots

    def blocks(self, M: int, N: int, K: int) -> int:
        gx, gy, gz = self.spec.grid(self.cfg, M, N, K)
        return gx * gy * gz

    def launch(
        self,
        M,
        N,
        K,
        alpha,
        a,
        lda,
        b,
        ldb,
        beta,
        c,
        ldc,
        splits: int = 1,
        batch: tuple[int, int, int, int] | None = None,
    ) -> None:
        """One launch (two with split-K). ``batch``: (count, A's, B's and C's batch strides in elements) for a
        batched variant: grid z is the batch."""
        grid = self.spec.grid(self.cfg, M, N, K)
        out, ldo = c, ldc
        if batch is not None:  # grid z over the batch, or the kernel walks the batch's tiles itself
            grid = (grid[0] * batch[0], grid[1], 1) if self.spec.schedules_batch else (grid[0], grid[1], batch[0])
        if splits > 1:  # grid z = slices of K; each writes raw partials (alpha 1, beta 0) into a workspace
            grid = (grid[0], grid[1], splits)
            c, ldc = cupy.empty((splits, M, N), dtype=F32), N
        if grid[1] > 65535 or grid[2] > 65535:
            raise ValueError(
                f"kernel {self.spec.name!r} with {self.cfg} needs a grid of {grid} blocks for a {M}x{N}x{K} "
                "product" + (f" batch of {batch[0]}" if batch else "") + "; CUDA allows at most 65535 blocks in y "
                "and z: use larger tiles or another kernel" + (", or split the batch" if batch else "")
            )
        i32 = np.int32
        args = (i32(M), i32(N), i32(K), np.float32(alpha), a, i32(lda), b, i32(ldb), np.float32(beta), c, i32(ldc))
        if batch is not None:
            args += tuple(np.int64(s) for s in batch[1:])
            if self.spec.schedules_batch:
                args += (i32(batch[0]),)
        self.kern(grid, self.block, args, shared_mem=self.smem)
        if splits > 1:
            _splitk.reduce(c, splits, M, N, alpha, beta, out, ldo)


_plans: dict[tuple, Plan] = {}


def get_plan(kernel: str, config: Mapping[str, int] | None, flags: tuple[int, int, int], device_id: int) -> Plan:
    key = (kernel, None if config is None else tuple(sorted(config.items())), flags, device_id)
    plan = _plans.get(key)
    if plan is None:
        spec = get_spec(kernel)
        if spec.kind != "gemm":
            raise ValueError(f"kernel {kernel!r} is not a matrix-product kernel; use one of {gemm_kernels_list()}")
        cc = compute_capability(device_id)
        spec.check_cc(
            cc, f"device {device_id}", f"use one of {[n for n in gemm_kernels_list() if REGISTRY[n].min_cc <= cc]}"
        )
        cfg = spec.resolve(config, cc)
        plan = _plans[key] = Plan(spec, cfg, device_kernel(spec, cfg, flags, device_id), flags)
    return plan


def gemm_kernels_list() -> list[str]:
    return [n for n, s in REGISTRY.items() if s.kind == "gemm"]


def _batch_rungs(dtype: str) -> list[str]:
    """The rungs that run batched products of ``dtype`` in one launch (``supports_batch``)."""
    return [n for n in gemm_kernels_list() if supports_batch(REGISTRY[n]) and dtype in REGISTRY[n].dtypes]


def _batch_operand(x, batch: tuple[int, ...], name: str, in_place: bool = False):
    """(3-D array (count or 1, rows, cols), leading dimension, batch stride in elements (0 when x broadcasts over
    the whole batch), 1 when its matrices stay column-major else 0). The matrices are made row-major, copying only
    what cannot be viewed so, except with ``in_place``: the rung reads column-major matrices (``reads_transposed``),
    which stay as they are when the copy engine can read them (matrices and columns start on 16 bytes); the
    leading dimension is then their column stride."""
    rows, cols = x.shape[-2:]
    nb = math.prod(batch)
    item = x.dtype.itemsize
    if math.prod(x.shape[:-2]) == 1:  # one matrix for every product of the batch
        m = x.reshape(rows, cols)
        ldx = _repack.column_major(m) if in_place else None
        if ldx is not None and aligned(m, ldx):
            return m.reshape(1, rows, cols), ldx, 0, 1
        m, ld = row_major(m, name, copy_ok=True)
        return m.reshape(1, rows, cols), ld, 0, 0
    if x.shape[:-2] != batch:  # broadcast over some batch dimensions only: materialize
        x = cupy.broadcast_to(x, batch + (rows, cols))
    x3 = x.reshape(nb, rows, cols)
    s0, s1, s2 = x3.strides
    if not (
        (s2 == item or cols <= 1) and s1 > 0 and s1 % item == 0 and s1 // item >= cols and s0 >= 0 and s0 % item == 0
    ):
        ldx = _repack.column_major(x3)
        if ldx is not None and in_place and aligned(x3, ldx) and (s0 // item) * item % 16 == 0:
            return x3, ldx, s0 // item, 1
        if ldx is not None:  # a batch of transposed views: a tiled copy, rows on 16 bytes
            x3, ld = _repack.transposed_copy(x3, ldx)
            return x3, ld, rows * ld, 0
        x3 = cupy.ascontiguousarray(x3)
        s0, s1 = x3.strides[:2]
    return x3, max(s1 // item, cols, 1), s0 // item, 0


def _fallback_batches(spec) -> bool:
    """Whether ``spec``'s fallback rung (for operands its copy engine cannot read) runs batched products."""
    return spec.fallback is not None and supports_batch(get_spec(spec.fallback))


def _copy_engine_batch(x3, bs: int):
    """A copy of the batch ``x3`` (count, rows, cols) whose rows and matrices the copy engine reads: (view of the
    copy, its leading dimension, its batch stride: 0 for a matrix broadcast over the batch, as ``bs`` was)."""
    y, ld = _repack.copy_engine_rows(x3)
    return y, ld, 0 if bs == 0 else x3.shape[1] * ld


def _choose(kernel, config, split_k, dtype: str, M: int, N: int, K: int, dev: int, batched: int = 0):
    """(kernel, configuration or None, split_k) for a product of ``dtype``: auto's choice, or the named rung
    (which must take that dtype) with its tuned or small tiles when no configuration is given."""
    if kernel == "auto":
        return _auto.select(M, N, K, dev, config, split_k, batched, dtype)
    spec = get_spec(kernel)
    if dtype not in spec.dtypes:
        takes = [n for n in gemm_kernels_list() if dtype in REGISTRY[n].dtypes]
        raise TypeError(
            f"kernel {kernel!r} multiplies {' and '.join(spec.dtypes)} arrays, not {dtype}; the rungs for "
            f"{dtype}: {takes or 'none yet'} (or kernel='auto')"
        )
    if config is None:  # a named rung fits the problem: its tuned entry, or tiles that fill the GPU
        config = _auto.named(kernel, M, N, K, dev, max(1, batched), dtype)
    return kernel, config, split_k


def _adjusted(spec, config, dev: int, rule, *args):
    """``config`` with the overrides ``rule(cfg, *args)`` gives (a spec's shape_config or pitch_config), when they
    keep every constraint; else ``config`` as it was."""
    cfg = spec.resolve(config, compute_capability(dev))
    over = rule(cfg, *args)
    if not over or all(cfg.get(k) == v for k, v in over.items()):
        return config
    new = {**cfg, **over}
    return config if spec.violations(new) else new


def _readable(kernel, spec, config, flags, dims, dev: int, dtype: str, count: int = 1):
    """(kernel, spec, config) that can read these operands: the copy engine reads 16-byte aligned rows (and batch
    strides) only, so a copy-engine rung hands operands it cannot read (``flags`` of A, B) to its fallback rung
    (loads of any alignment), with that rung's tiles for the shape."""
    if spec.tensor_maps is None or (flags[0] and flags[1]):
        return kernel, spec, config
    return spec.fallback, get_spec(spec.fallback), _auto.named(spec.fallback, *dims, dev, count, dtype)


def decide_batched(a, b, out, batch, kernel, config, beta, dev, akind, epilogue=None) -> tuple[Call, tuple] | None:
    """A batched product: one launch of a batched variant (grid z over the batch, or one run of the batch's tiles
    for a kernel that schedules them); no split-K, repacking, staging or edge strips (each product is one tile
    grid). Operands a copy-engine rung cannot read go to its fallback rung, or, when that runs no batches (the half
    rungs), are copied into rows on 16 bytes. None when kernel="auto" chose a rung without batched variants: the
    caller runs the products one at a time."""
    M, K = a.shape[-2:]
    N = b.shape[-1]
    nb = math.prod(batch)
    dt = a.dtype.name
    kernel_arg = kernel
    chosen = config is None  # cumm chooses the configuration (spec.shape_config may adjust it)
    kernel, config, _ = _choose(kernel, config, 1, dt, M, N, K, dev, batched=nb)
    if epilogue is not None:  # a rung whose stores take it (plan/epilogue.py), and runs the batch in one launch:
        # one launch a product would give every product z = 0
        kernel, config = _epi.route(kernel, kernel_arg, None), config if kernel not in _epi.NO_EPILOGUE else None
        if kernel_arg == "auto" and not supports_batch(get_spec(kernel)):
            cc = compute_capability(dev)
            able = [n for n in _batch_rungs(dt) if REGISTRY[n].min_cc <= cc and n not in _epi.NO_EPILOGUE]
            kernel, config = (able[-1], None) if able else (kernel, config)
    spec = get_spec(kernel)
    in_place = spec.reads_transposed and supports_batch(spec)  # column-major batches read as they are
    a3, lda, bsa, ta = _batch_operand(a, batch, "a", in_place)
    b3, ldb, bsb, tb = _batch_operand(b, batch, "b", in_place)
    c3 = out.reshape(nb, M, N)
    s0, s1, s2 = c3.strides
    oi = c3.dtype.itemsize
    if not (s2 == oi or N <= 1) or not shares(c3, out) or s1 % oi or s0 % oi or s1 // oi < N:
        raise ValueError(
            f"out must be C-contiguous (row-major with unit column stride) for a batched product; got "
            f"strides {out.strides} for shape {out.shape}"
        )
    ldc, bsc = max(s1 // oi, N, 1), s0 // oi
    if spec.kind != "gemm":
        get_plan(kernel, config, (1, 1, 1), dev)  # its message: not a matrix-product kernel
    if not supports_batch(spec):
        if kernel_arg == "auto":
            return None
        able = _batch_rungs(dt)
        raise ValueError(
            f"kernel {kernel!r} does not run batched products (its template does not start with "
            f"CUMM_BATCH() or CUMM_SPLIT_K, and its spec does not schedule batches); "
            + (
                f"the rungs that do: {able}"
                if able
                else f"no rung runs batched {dt} products in one launch: kernel='auto' runs them one at a time"
            )
        )

    def ok(x3, ld, bs):  # every matrix of the batch starts 16-byte aligned, and so does each of its rows
        item = x3.dtype.itemsize
        return int(x3.data.ptr % 16 == 0 and ld * item % 16 == 0 and bs * item % 16 == 0)

    flags = (ok(a3, lda, bsa), ok(b3, ldb, bsb), ok(c3, ldc, bsc), 1)
    if spec.tensor_maps is not None and not (flags[0] and flags[1]) and not _fallback_batches(spec):
        # the copy engine cannot read them and the fallback rung runs no batches (one launch a product): copy the
        # operands into rows on 16 bytes instead, one pass each, and run the batch in one launch
        if not flags[0]:
            a3, lda, bsa = _copy_engine_batch(a3, bsa)
        if not flags[1]:
            b3, ldb, bsb = _copy_engine_batch(b3, bsb)
        flags = (1, 1, flags[2], 1)
    kernel, spec, config = _readable(kernel, spec, config, flags, (M, N, K), dev, dt, nb)
    if epilogue is not None and kernel in _epi.NO_EPILOGUE:  # the fallback rung cannot take it
        kernel, config = _epi.route(kernel, "auto", None), None
        spec = get_spec(kernel)
    if (ta or tb) and not spec.reads_transposed:  # the other operand sent the call to a fallback rung
        (a3, lda, bsa, ta), (b3, ldb, bsb, tb) = _batch_operand(a, batch, "a"), _batch_operand(b, batch, "b")
        flags = (ok(a3, lda, bsa), ok(b3, ldb, bsb), flags[2], 1)
    layout = (TRANSPOSED_A if ta else 0) | (TRANSPOSED_B if tb else 0)
    if chosen and spec.schedules_batch and spec.shape_config is not None:
        # the batch's tiles are one run, as those of one product nb times as tall (as for the tuned lookup)
        config = _adjusted(spec, config, dev, spec.shape_config, nb * M, N, K, _auto._sms(dev))
    if nb > 65535 and not spec.schedules_batch:  # grid z over the batch
        raise ValueError(
            f"a batch of {nb} products is more than CUDA's 65535 blocks in z (kernel {kernel!r}): split the batch"
        )
    if a3.dtype.itemsize != 4 or layout:
        flags = (*flags, dtype_flag(a3.dtype.name, c3.dtype.name))
    if layout:
        flags = (*flags, layout)
    plan = get_plan(kernel, config, _epi.with_flags(flags, epilogue), dev)
    if spec.schedules_batch and nb * math.prod(spec.grid(plan.cfg, M, N, K)) >= 2**31:
        raise ValueError(f"a batch of {nb} products of {M}x{N}x{K} has 2^31 tiles or more: split the batch")
    copied = not (shares(a3, a) or bsa == 0 and a3.data.mem is a.data.mem) or not (
        shares(b3, b) or bsb == 0 and b3.data.mem is b.data.mem
    )
    fast = not copied and a3.data.ptr == a.data.ptr and b3.data.ptr == b.data.ptr
    call = Call(
        plan,
        akind,
        dev,
        (M, N, K),
        (lda, ldb, ldc),
        c3.dtype,
        out.shape,
        (0, 0, 0),
        fast,
        dict(splits=1, copies=tuple(n for n, x3, x in (("A", a3, a), ("B", b3, b)) if x3.data.mem is not x.data.mem)),
        batch=(nb, bsa, bsb, bsc),
        # maps go with the driver launch (Plan.launch has none); so does an epilogue's CummAlpha
        direct=spec.tensor_maps is not None or epilogue is not None,
    )
    return call, (a3, b3, c3)


def decide(a, b, out, kernel, config, split_k, beta, dev, akind, epilogue=None) -> Call:
    """Every decision for this call's key: kernel and configuration, repacking, split count, staging, strips."""
    M, K = a.shape
    N = b.shape[1]
    a_in, b_in = a, b
    dt, odt = a.dtype.name, out.dtype.name
    chosen = config is None  # cumm chooses the configuration (spec.shape_config, pitch_config may adjust it)
    kernel_arg, split_arg = kernel, split_k
    kernel, config, split_k = _choose(kernel, config, split_k, dt, M, N, K, dev)
    if epilogue is not None:  # one unsplit launch of a rung whose stores take it (plan/epilogue.py)
        routed = _epi.route(kernel, kernel_arg, split_arg)
        kernel, config, split_k = routed, config if routed == kernel else None, None
    spec = get_spec(kernel)
    # a transposed view that the rung reads in place keeps its layout (its column stride is its ld); any other
    # layout is made row-major (transposed views by a tiled copy)
    a, lda, ta = _in_place(a, "a", spec)
    b, ldb, tb = _in_place(b, "b", spec)
    c, ldc = row_major(out, "out", copy_ok=False)
    if max(lda, ldb, ldc) > INT32_MAX:
        raise ValueError(f"leading dimensions must be below 2**31, got {lda}, {ldb}, {ldc}")
    half = dt != "float32"
    if half and split_k not in (None, 1):
        raise ValueError(f"split_k={split_k} is for float32 products; {dt} runs unsplit (split_k=None or 1)")
    flags0 = (aligned(a, lda), aligned(b, ldb), aligned(c, ldc))
    pad_a = pad_b = False
    if _repack.ENABLED and spec.tensor_maps is not None and not (flags0[0] and flags0[1]):
        # rows the copy engine cannot read: copied into rows it reads where that pays, else the fallback rung
        item = a.dtype.itemsize
        pad_a = not flags0[0] and _repack.pads_for_copy_engine(M, N, K, "a", item)
        pad_b = not flags0[1] and _repack.pads_for_copy_engine(M, N, K, "b", item)
        if (pad_a or flags0[0]) and (pad_b or flags0[1]):
            if pad_a:
                a, lda = _repack.copy_engine_rows(a)
            if pad_b:
                b, ldb = _repack.copy_engine_rows(b)
            flags0 = (1, 1, flags0[2])
        else:  # one of them goes to the fallback anyway
            pad_a = pad_b = False
    kernel, spec, config = _readable(kernel, spec, config, flags0, (M, N, K), dev, dt)
    if epilogue is not None and kernel in _epi.NO_EPILOGUE:  # the fallback rung cannot take it
        kernel, config = _epi.route(kernel, "auto", None), None
        spec = get_spec(kernel)
    if (ta or tb) and not spec.reads_transposed:  # the other operand sent the call to a fallback rung
        (a, lda), (b, ldb), ta, tb = row_major(a, "a", True), row_major(b, "b", True), 0, 0
        flags0 = (aligned(a, lda), aligned(b, ldb), flags0[2])
    layout = (TRANSPOSED_A if ta else 0) | (TRANSPOSED_B if tb else 0)
    if chosen and spec.shape_config is not None:
        config = _adjusted(spec, config, dev, spec.shape_config, M, N, K, _auto._sms(dev))
    if chosen and not layout and spec.pitch_config is not None:
        config = _adjusted(spec, config, dev, spec.pitch_config, lda * a.dtype.itemsize, ldb * b.dtype.itemsize)
    # Split-K, padded copies, staging and strips are machinery of the float32 rungs that load through
    # registers; the copy-engine rungs and the half rungs run as one launch.
    plain = half or spec.tensor_maps is not None or epilogue is not None
    repack_a = repack_b = False
    if _repack.ENABLED and not plain and not (flags0[0] and flags0[1]):  # scalar loads: a padded copy may pay
        repack_a, repack_b = _repack.repack_plan(spec, M, N, K, bool(flags0[0]), bool(flags0[1]))
    flags = (1 if repack_a else flags0[0], 1 if repack_b else flags0[1], flags0[2])
    splits = 1
    if split_k is not None and split_k > 1:  # only the slices that get at least one slab of K
        splits = _splitk.effective_splits(K, split_k, _splitk.slab(kernel, config, compute_capability(dev)))
        if splits > 1:  # the kernel writes to a fresh contiguous workspace (ldc = N), not to out
            flags = (flags[0], flags[1], int(N % 4 == 0))
    stage = bool(
        _repack.ENABLED
        and not plain
        and not flags[2]
        and splits == 1
        and spec.stage_out
        and _repack.should_stage_out(M, N, K, beta)
    )
    if stage:
        flags = (flags[0], flags[1], 1)
    if half or layout:
        flags = (*flags, 0, dtype_flag(dt, odt))
    if layout:
        flags = (*flags, layout)
    plan = get_plan(kernel, config, _epi.with_flags(flags, epilogue), dev)
    mm, nn = M, N
    bm, bn = plan.tile
    if (
        bm
        and splits == 1
        and _edges.ENABLED
        and not plain
        and (0 < M % bm <= _edges.EDGE_ROWS or 0 < N % bn <= _edges.EDGE_ROWS)
    ):
        mm, nn = _edges.split(M, N, bm, bn, lambda m, n: plan.blocks(m, n, K), plan.slots(dev))
    # fast: one launch of the plan's kernel straight on the caller's arrays (row_major made no copy)
    fast = (
        not (repack_a or repack_b or stage)
        and splits == 1
        and (mm, nn) == (M, N)
        and shares(a, a_in)
        and shares(b, b_in)
    )
    grid = plan.spec.grid(plan.cfg, M, N, K)
    if grid[1] > 65535 or grid[2] > 65535:
        fast = False  # Plan.launch reports it
    copies = tuple(
        n for n, x, x_in, more in (("A", a, a_in, repack_a), ("B", b, b_in, repack_b)) if more or not shares(x, x_in)
    ) + (("C",) if stage else ())
    decisions = dict(
        repack_a=repack_a,
        repack_b=repack_b,
        splits=splits,
        stage=stage,
        mm=mm,
        nn=nn,
        pad_a=pad_a,
        pad_b=pad_b,
        copies=copies,
    )
    spans = (span(a), span(b), span(c))
    call = Call(plan, akind, dev, (M, N, K), (lda, ldb, ldc), c.dtype, out.shape, spans, fast, decisions, direct=plain)
    return call, (a, b, c)


def _in_place(x, name: str, spec) -> tuple:
    """(operand, leading dimension, 1 when it stays column-major): a transposed view (cumm.plan.repack.column_major)
    that ``spec`` reads in place, when its columns start on 16 bytes (the copy engine's rule); else (row-major view
    or copy, its ld, 0)."""
    if spec.reads_transposed:
        ld = _repack.column_major(x)
        if ld is not None and aligned(x, ld):
            return x, ld, 1
    return (*row_major(x, name, copy_ok=True), 0)


def run(call: Call, a, b, c, alpha: float, beta: float) -> None:
    """A call that is not one launch on the caller's arrays (copied or repacked operands, split-K, a staged output,
    edge strips), on cupy views of its arrays, on the current stream."""
    d = call.decisions
    M, N, K = call.M, call.N, call.K
    lay = layout_of(call.plan.flags)  # transposed operands the kernel reads in place
    a, lda = (a, call.lda) if lay & TRANSPOSED_A else row_major(a, "a", copy_ok=True)
    b, ldb = (b, call.ldb) if lay & TRANSPOSED_B else row_major(b, "b", copy_ok=True)
    c, ldc = row_major(c, "out", copy_ok=False)
    if d.get("pad_a"):  # rows the copy engine cannot read, copied into rows it reads (see _decide)
        a, lda = _repack.copy_engine_rows(a)
    if d.get("pad_b"):
        b, ldb = _repack.copy_engine_rows(b)
    if call.direct:  # a copy-engine or half rung: one launch on the row-major copies (its maps made per pointer)
        with cupy.cuda.Device(call.dev):
            call.launch(a.data.ptr, b.data.ptr, c.data.ptr, alpha, beta, cupy.cuda.get_current_stream().ptr)
        return
    plan = call.plan
    try:
        if d["repack_a"]:
            a, lda = _repack.repack(a)
        if d["repack_b"]:
            b, ldb = _repack.repack(b)
    except cupy.cuda.memory.OutOfMemoryError:  # the copy is an optimization: run the scalar variant instead
        a, lda = row_major(a, "a", copy_ok=True)
        b, ldb = row_major(b, "b", copy_ok=True)
        flags = (aligned(a, lda), aligned(b, ldb), plan.flags[2])
        plan = get_plan(plan.spec.name, plan.cfg, flags, call.dev)
    staged = _repack.stage_out(c, beta) if d["stage"] else None
    if d["stage"] and staged is None:  # out of memory for the padded buffer: the scalar-store variant, in place
        plan = get_plan(plan.spec.name, plan.cfg, (*plan.flags[:2], aligned(c, ldc), *plan.flags[3:]), call.dev)
    tgt, ldt = staged if staged is not None else (c, ldc)
    dev = call.dev
    with cupy.cuda.Device(dev):
        plan.launch(d["mm"], d["nn"], K, alpha, a, lda, b, ldb, beta, tgt, ldt, d["splits"])
        if (d["mm"], d["nn"]) != (M, N):
            _edges.run(M, N, K, d["mm"], d["nn"], alpha, a, lda, b, ldb, beta, tgt, ldt, _auto._sms(dev), dev)
    if staged is not None:
        _repack.unstage_out(tgt, ldt, c, ldc)
