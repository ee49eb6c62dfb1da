"""``cumm.matmul``: key -> plan -> launch.

A call's *key* holds everything its checks and decisions depend on but the data pointers: the kind, shape,
strides, dtype, device and 16-byte misalignment of each array (``out`` too, or None), ``kernel``, ``config``,
``split_k`` and whether ``beta`` is zero. The first call with a key runs every check and makes a :class:`Call`,
which carries every decision: the kernel's :class:`Plan` (spec, configuration, compiled kernel, launch geometry),
the split count, the repacking of unaligned operands, the staging of an unaligned output, the edge strips and
the packed kernel arguments. A later call with that key tests only what depends on the pointers (``out``
overlapping an input) and launches: for most calls one driver launch with the arguments written into a
packed buffer, no Python-level argument conversion.
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Mapping, Sequence

import cupy
import numpy as np
from cupy_backends.cuda.api import driver as _driver

from ..ladder import REGISTRY, get_spec
from ..plan import auto as _auto
from ..plan import edges as _edges
from ..plan import repack as _repack
from ..plan import splitk as _splitk
from ..plan.operands import (
    F32,
    F32_MAX,
    INT32_MAX,
    aligned,
    check_operand,
    check_out,
    compute_capability,
    real_scalar,
    row_major,
    span,
)
from ..runtime import arrays as _arrays
from ..runtime import scratch as _scratch
from ..runtime import tmaps as _tmaps
from ..runtime.compile import device_kernel
from ..runtime.render import TRANSPOSED_A, TRANSPOSED_B, dtype_flag, layout_of, supports_batch


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
                width = _tmaps.cluster_width(func)
                if width > 1:
                    self._slots = width * _tmaps.max_active_clusters(func, width, threads, self.smem)
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


def _dims_ok(M: int, N: int, K: int) -> None:
    if max(M, N, K) > INT32_MAX:
        raise ValueError(f"dimensions must be below 2**31, got M={M}, N={N}, K={K}")


def _config_key(config) -> tuple | None:
    """``config`` as a hashable key part; TypeError for anything but None or a mapping of names to ints."""
    if config is None:
        return None
    if not isinstance(config, Mapping):
        raise TypeError(
            f"config must be a mapping of parameter names to ints, e.g. {{'BM': 64, 'BN': 64}}, or None; "
            f"got {type(config).__name__} {config!r}"
        )
    try:
        return tuple(sorted(config.items()))
    except TypeError:
        raise TypeError(f"config's keys must be parameter names (str), got {list(config)!r}") from None


# ---------------------------------------------------------------------------------------------------
# The key of a call: everything but the pointers
# ---------------------------------------------------------------------------------------------------

_ND = cupy.ndarray


def _key(a, b, out, kernel, config, split_k, beta) -> tuple | None:
    """The call's key, or None when this call is not cached (another kind of array, an unhashable argument).
    (matmul's hot path builds the same tuple inline for cupy arrays.)"""
    ta = type(a)
    try:
        if ta is _ND and type(b) is _ND and (out is None or type(out) is _ND):
            da, db = a.data, b.data
            key = (
                a.shape,
                a.strides,
                a.dtype,
                da.device_id,
                da.ptr & 15,
                b.shape,
                b.strides,
                b.dtype,
                db.device_id,
                db.ptr & 15,
                None if out is None else (out.shape, out.strides, out.dtype, out.data.device_id, out.data.ptr & 15),
                kernel,
                None if config is None else tuple(sorted(config.items())),
                split_k,
                beta == 0.0,
            )
        elif ta.__module__ == "torch" and type(b) is ta and (out is None or type(out) is ta):
            key = (
                "torch",
                a.shape,
                a.stride(),
                a.dtype,
                a.get_device(),
                a.data_ptr() & 15,
                b.shape,
                b.stride(),
                b.dtype,
                b.get_device(),
                b.data_ptr() & 15,
                None if out is None else (out.shape, out.stride(), out.dtype, out.get_device(), out.data_ptr() & 15),
                kernel,
                None if config is None else tuple(sorted(config.items())),
                split_k,
                beta == 0.0,
            )
        else:
            return None
        hash(key)
        return key
    except Exception:  # an unhashable kernel=, a config that is not a mapping: the checked path says what
        return None


class Call:
    """Every decision of a matmul call with a given key, and how to run it on new pointers."""

    __slots__ = (
        "plan",
        "kind",
        "dev",
        "M",
        "N",
        "K",
        "lda",
        "ldb",
        "ldc",
        "dtype",
        "out_shape",
        "spans",
        "fast",
        "slots",
        "f32",
        "params",
        "params_ptr",
        "func",
        "grid",
        "lock",
        "decisions",
        "batch",
        "alpha",
        "beta",
        "geometry",
        "torch_empty",
        "direct",
        "maps",
        "scratch",
        "cell",
    )

    def __init__(
        self,
        plan: Plan,
        kind_: str,
        dev: int,
        dims,
        lds,
        dtype,
        out_shape,
        spans,
        fast: bool,
        decisions: dict,
        batch: tuple[int, int, int, int] | None = None,
        direct: bool = False,
    ):
        self.plan, self.kind, self.dev = plan, kind_, dev
        (self.M, self.N, self.K), (self.lda, self.ldb, self.ldc) = dims, lds
        self.dtype, self.out_shape, self.spans, self.fast = dtype, out_shape, spans, fast
        self.decisions = decisions  # what the checked path decided (repack, stage, splits, edges), for run()
        self.batch = batch  # (count, batch strides of A, B, C in elements) of a batched product
        self.lock = threading.Lock()
        self.torch_empty = None  # torch.empty for this call's result (torch inputs), made on first use
        # direct: one driver launch (launch()) runs the call on row-major operands, copies or not; fast: and on
        # the caller's own arrays, so a cached call may launch straight on their pointers
        self.direct = direct or fast
        self.maps = ()
        self.scratch = None  # (device pointer cell, bytes) of a kernel that takes a workspace
        if self.direct:
            M, N, K = dims
            # CUMM_GEMM_ARGS: M N K alpha A lda B ldb beta C ldc, each in an 8-byte slot (int32 and float32 in the
            # low half, little-endian)
            # (batched: then bsa bsb bsc as int64, and the batch count for a kernel that walks the batch's tiles)
            spec = plan.spec
            walk = batch is not None and spec.schedules_batch
            n = 11 if batch is None else 15 if walk else 14
            self.slots = np.zeros(n, dtype=np.uint64)
            self.f32 = self.slots.view(np.float32)
            for slot, v in ((0, M), (1, N), (2, K), (5, self.lda), (7, self.ldb), (10, self.ldc)):
                self.slots[slot] = v
            if batch is not None:
                self.slots[11:14] = np.array(batch[1:], dtype=np.int64).view(np.uint64)
            if walk:
                self.slots[14] = batch[0]
            if spec.tensor_maps is not None:  # tensor maps by value after the arguments, made per pointer
                c_map = bool(plan.flags[2]) and dtype != F32
                lay = layout_of(plan.flags)  # (passed only when set: a user's tensor_maps need not take it)
                specs = spec.tensor_maps(
                    plan.cfg, M, N, K, self.lda, self.ldb, self.ldc, c_map, **({"layout": lay} if lay else {})
                )
                if batch is not None:  # the batched variant reads 3-D maps: the batch is their third dimension
                    specs = [m and m.batched(batch[0], batch[1 + m.operand]) for m in specs]
                self.maps = tuple(
                    (n + i, m.operand, _tmaps.Maps(m)) if m is not None else (n + i, None, None)
                    for i, m in enumerate(specs)
                )
            gx, gy, gz = spec.grid(plan.cfg, M, N, K)
            if walk:  # the batch's tiles are one run
                gx *= batch[0]
            if spec.persistent:  # one block per slot walks the tiles (of its product when grid z is the batch)
                slots = max(1, plan.slots(dev) // (1 if batch is None or walk else batch[0]))
                # fewer tiles than slots: a stream-K kernel spreads their k-slabs over every slot when its
                # workspace function gives it a workspace for that many blocks
                wide = batch is None and spec.workspace is not None and gx < slots
                gx = slots if wide and spec.workspace(plan.cfg, M, N, K, slots) else min(gx, slots)
            # a workspace pointer after the maps: a per-stream buffer, written at launch (null when not needed
            # or batched)
            ws = [np.zeros(1, dtype=np.uint64)] if spec.workspace is not None else []
            if ws and batch is None:
                nbytes = spec.workspace(plan.cfg, M, N, K, gx)
                if nbytes:
                    self.scratch = (ws[0], nbytes)
            self.params = np.array(
                [self.slots.ctypes.data + 8 * i for i in range(n)] + [0] * len(self.maps) + [w.ctypes.data for w in ws],
                dtype=np.uint64,
            )
            self.cell = ws  # kept alive: params holds its address
            for arg, operand, _ in self.maps:
                if operand is None:  # a zeroed map the kernel does not read
                    self.params[arg] = _ZERO_MAP.ctypes.data
            self.params_ptr = self.params.ctypes.data  # (the .ctypes property builds an object per access)
            self.alpha = self.beta = None  # the alpha and beta written into the slots last
            self.func = plan.kern.kernel.ptr
            self.grid = (gx, gy, gz if batch is None or walk else batch[0])
            self.geometry = (*self.grid, *plan.block, plan.smem, self.func)

    def launch(self, pa: int, pb: int, pc: int, alpha: float, beta: float, stream: int) -> None:
        """The kernel on these pointers (a direct call: no split, no repacking, no staging, no strips)."""
        if self.maps:
            with _tmaps.arena.lock:  # a map's arena row cannot be handed on between its lookup and the launch
                ptrs = (pa, pb, pc)
                for arg, operand, maps in self.maps:
                    if maps is not None:
                        p = ptrs[operand]
                        self.params[arg] = maps.known.get(p) or maps.make(p)
                self._launch(pa, pb, pc, alpha, beta, stream)
            return
        with self.lock:  # the slots are shared; the driver copies them when the launch is queued
            self._launch(pa, pb, pc, alpha, beta, stream)

    def _launch(self, pa: int, pb: int, pc: int, alpha: float, beta: float, stream: int) -> None:
        s = self.slots
        s[4] = pa
        s[6] = pb
        s[9] = pc
        if self.scratch is not None:
            cell, nbytes = self.scratch
            cell[0] = _scratch.pointer(self.dev, stream, nbytes)
        if alpha != self.alpha or beta != self.beta:
            self.f32[6], self.f32[16] = self.alpha, self.beta = alpha, beta
        gx, gy, gz, bx, by, bz, smem, func = self.geometry
        try:
            _driver.launchKernel(func, gx, gy, gz, bx, by, bz, smem, stream, self.params_ptr, 0)
        except _driver.CUDADriverError as e:
            if not _arrays.retry_without_context(e):
                raise
            _driver.launchKernel(func, gx, gy, gz, bx, by, bz, smem, stream, self.params_ptr, 0)


_ZERO_MAP = _tmaps.aligned_map()  # 128 zero bytes, 64-byte aligned: a map argument a kernel does not read


_calls: dict[tuple, Call] = {}
_CALLS_MAX = 4096


def matmul(
    a,
    b,
    *,
    kernel: str = "auto",
    config: Mapping[str, int] | None = None,
    out=None,
    alpha: float = 1.0,
    beta: float = 0.0,
    split_k: int | None = None,
):
    """C = alpha * a @ b + beta * out, for 2-D GPU arrays (cupy, torch, or anything with
    ``__cuda_array_interface__`` / ``__dlpack__``); the result is of the inputs' kind (see README.md).

    ``kernel``: a rung's name (``cumm.kernels()``) or "auto"; ``config``: overrides of its tile parameters;
    ``split_k``: slices of K run in parallel and summed (kernels with ``split_k`` in their spec); None: 1, or
    the heuristic's choice for kernel="auto". Kernels run on the stream of the inputs' library: torch's current
    stream for torch tensors, CuPy's current stream otherwise.
    """
    # (the cached paths take alpha and beta as they are: floats that float32 holds; NaN, inf or larger go to the
    # checks, which name them)
    if (
        type(a) is _ND
        and type(b) is _ND
        and type(alpha) is float
        and type(beta) is float
        and -F32_MAX <= alpha <= F32_MAX
        and -F32_MAX <= beta <= F32_MAX
    ):
        da, db = a.data, b.data
        pa, pb = da.ptr, db.ptr
        if out is None:
            part = None
        elif type(out) is _ND:
            do = out.data
            part = (out.shape, out.strides, out.dtype, do.device_id, do.ptr & 15)
        else:
            return _checked(a, b, out, kernel, config, alpha, beta, split_k, None)
        try:
            key = (
                a.shape,
                a.strides,
                a.dtype,
                da.device_id,
                pa & 15,
                b.shape,
                b.strides,
                b.dtype,
                db.device_id,
                pb & 15,
                part,
                kernel,
                None if config is None else tuple(sorted(config.items())),
                split_k,
                beta == 0.0,
            )
            call = _calls.get(key)
        except Exception:  # unhashable kernel= or config values, a config that is not a mapping
            return _checked(a, b, out, kernel, config, alpha, beta, split_k, None)
        if call is None:
            return _checked(a, b, out, kernel, config, alpha, beta, split_k, key)
        if out is not None and _overlaps(pa, pb, do.ptr, call.spans):
            return _checked(a, b, out, kernel, config, alpha, beta, split_k, None)  # its checks, its message
        if not call.fast:  # copies, split-K or strips around the kernel: decided, run on cupy views
            if out is None:
                with cupy.cuda.Device(call.dev):
                    out = _ND(call.out_shape, call.dtype)
            return _run_decided(call, a, b, out, alpha, beta, cupy.cuda.get_current_stream().ptr)
        dev = call.dev
        if dev != _getdevice():
            with cupy.cuda.Device(dev):
                return _launch_cupy(call, pa, pb, out, alpha, beta)
        # (the common case inline: _launch_cupy without its call, Call.launch without tensor maps)
        if out is None:
            out = _ND(call.out_shape, call.dtype)
        if call.maps:
            call.launch(pa, pb, out.data.ptr, alpha, beta, _stream().ptr)
        else:
            with call.lock:
                call._launch(pa, pb, out.data.ptr, alpha, beta, _stream().ptr)
        return out
    key = _key(a, b, out, kernel, config, split_k, beta)
    call = _calls.get(key) if key is not None else None
    if (
        call is None
        or type(alpha) is not float
        or type(beta) is not float
        or not (-F32_MAX <= alpha <= F32_MAX and -F32_MAX <= beta <= F32_MAX)
    ):
        return _checked(a, b, out, kernel, config, alpha, beta, split_k, key)
    # torch tensors
    pa, pb = a.data_ptr(), b.data_ptr()
    if out is None:
        if call.torch_empty is None:
            call.torch_empty = _arrays.torch_empty(call.out_shape, call.dtype, call.dev)
        out = call.torch_empty()
        pc = out.data_ptr()
    else:
        pc = out.data_ptr()
        if _overlaps(pa, pb, pc, call.spans):
            return _checked(a, b, out, kernel, config, alpha, beta, split_k, None)
    stream = _arrays.torch_stream(call.dev)
    if not call.fast:
        return _run_decided(call, a, b, out, alpha, beta, stream)
    if call.dev != _getdevice():
        with cupy.cuda.Device(call.dev):
            call.launch(pa, pb, pc, alpha, beta, stream)
    else:
        call.launch(pa, pb, pc, alpha, beta, stream)
    return out


def _launch_cupy(call: Call, pa: int, pb: int, out, alpha: float, beta: float):
    """A cached single-launch call on cupy arrays, on the current device (call.dev); out checked already."""
    if out is None:
        out = _ND(call.out_shape, call.dtype)
    pc = out.data.ptr
    call.launch(pa, pb, pc, alpha, beta, cupy.cuda.get_current_stream().ptr)
    return out


def decision(a, b, out, *, kernel: str = "auto", config: Mapping[str, int] | None = None, beta: float = 0.0) -> str:
    """What a call ``matmul(a, b, kernel=kernel, config=config, out=out, beta=beta)`` made earlier runs: "<kernel>
    <non-default parameters>", the split count when it splits and the operands it copies on each call (a transposed
    view a rung does not read in place, rows padded for 16-byte or copy-engine reads, C staged), e.g. "tf32x3 BM=64
    BN=64 split_k=4", "wgmma_ws (copies B)"; "" if not known."""
    key = _key(a, b, out, kernel, config, None, float(beta))
    call = _calls.get(key) if key is not None else None
    if call is None:
        return ""
    spec, cfg = call.plan.spec, call.plan.cfg
    base = spec.default_config(compute_capability(call.dev))
    diff = " ".join(f"{k}={v}" for k, v in cfg.items() if base.get(k) != v)
    splits = call.decisions.get("splits", 1)
    copies = call.decisions.get("copies", ())  # operands laid out anew (transposed, padded rows) and staged outputs
    extra = f"(copies {' and '.join(copies)})" if copies else ""
    return " ".join(x for x in (spec.name, diff, f"split_k={splits}" if splits > 1 else "", extra) if x)


_getdevice = cupy.cuda.runtime.getDevice
_stream = cupy.cuda.get_current_stream


def _overlaps(pa: int, pb: int, pc: int, spans: tuple[int, int, int]) -> bool:
    ea, eb, ec = spans
    return (pc < pa + ea and pa < pc + ec) or (pc < pb + eb and pb < pc + ec)


def _checked(a, b, out, kernel, config, alpha, beta, split_k, key):
    """The whole call with every check; makes (and keeps under ``key``) the Call when the call can have one."""
    akind = _arrays.kind(a)
    if split_k is not None:
        split_k = _splitk.check_arg(split_k, kernel)
    if not isinstance(kernel, str):
        raise TypeError(f"kernel must be a str (a rung's name or 'auto'), got {kernel!r}")
    _config_key(config)
    alpha, beta = real_scalar(alpha, "alpha"), real_scalar(beta, "beta")
    user_out = out
    a_in, b_in = a, b
    a, b = _arrays.as_cupy(a, "a"), _arrays.as_cupy(b, "b")
    for name, x in (("b", b_in), ("out", out)):
        if x is not None and _arrays.kind(x) != akind:
            raise TypeError(
                f"a is a {_arrays.describe(a_in)} but {name} is a {_arrays.describe(x)}: pass arrays of "
                "one kind (the result is of the inputs' kind)"
            )
    check_operand(a, "a", batched=True)
    check_operand(b, "b", batched=True)
    if a.dtype != b.dtype:
        raise TypeError(
            f"a has dtype {a.dtype} and b {b.dtype}: matmul multiplies arrays of one dtype (convert one with .astype)"
        )
    M, N, K, batch, shape = _shapes(a, b)
    dev = a.data.device_id  # (x.device builds a Device object per call)
    if b.data.device_id != dev:
        raise ValueError(f"a is on device {dev} and b on device {b.data.device_id}; put both on one device")
    _dims_ok(M, N, K)
    if user_out is None:
        if beta != 0.0:
            raise ValueError(f"beta={beta} needs out= (C = alpha * a @ b + beta * out)")
        result = _arrays.empty(akind if akind == "torch" else "cupy", shape, a.dtype, dev)
    else:
        result = user_out
    out = _arrays.as_cupy(result, "out")
    if user_out is not None:
        check_out(out, (a, b), shape, dev, ("a", "b"))
    # numpy's rules for 1-D operands: a vector a is one row, a vector b one column (views)
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    o2 = out.reshape(batch + (M, N)) if out.ndim != len(batch) + 2 else out
    if o2.size and not _shares(o2, out):
        raise ValueError(
            f"out (shape {out.shape}, strides {out.strides}) cannot be viewed as the {batch + (M, N)} "
            "result without a copy: pass a C-contiguous out"
        )

    stream = _arrays.torch_stream(dev) if akind == "torch" else None
    with _arrays.on_stream(stream, dev) if stream is not None else contextlib.nullcontext():
        if M == 0 or N == 0 or 0 in batch:
            return result
        if K == 0:  # the empty sum: alpha * 0 + beta * out
            if beta == 0.0:
                out.fill(0)
            else:
                out *= np.float32(beta)
            return result
        folded = False
        if batch and b2.ndim == 2:
            # a batch times one matrix, a's matrices stacked row after row (and out's): one product of batch * M
            # rows, which every rung runs with the tiles tuned for its size; cached under this call's key (a fast
            # call launches on the caller's pointers, which are the stacked views')
            af, of = _stacked(a2, K), _stacked(o2, N)
            if af is not None and of is not None:
                a2, o2, batch, folded = af, of, (), True
        if batch:
            got = _decide_batched(a2, b2, o2, batch, kernel, config, beta, dev, akind)
            if got is None:  # auto chose a rung without batches: one product at a time
                _each(a2, b2, o2, batch, config, alpha, beta)
                return result
            call, ops = got
        else:
            call, ops = _decide(a2, b2, o2, kernel, config, split_k, beta, dev, akind)
        call.out_shape = shape
        call.spans = (span(a), span(b), span(out))  # the caller's arrays, which the cached paths test for overlap
        if key is not None and akind in ("cupy", "torch") and (call.fast or not (batch or folded)):
            if len(_calls) >= _CALLS_MAX:
                _calls.clear()
            _calls[key] = call
        sptr = cupy.cuda.get_current_stream().ptr
        if call.fast:
            with cupy.cuda.Device(dev):
                call.launch(a.data.ptr, b.data.ptr, out.data.ptr, alpha, beta, sptr)
        elif batch and not call.direct:
            with cupy.cuda.Device(dev):
                call.plan.launch(
                    M, N, K, alpha, ops[0], call.lda, ops[1], call.ldb, beta, ops[2], call.ldc, batch=call.batch
                )
        elif call.direct:  # one launch on the row-major operands _decide made (copies or views)
            with cupy.cuda.Device(dev):
                call.launch(ops[0].data.ptr, ops[1].data.ptr, ops[2].data.ptr, alpha, beta, sptr)
        else:  # on the row-major operands _decide made: its copies are not made twice
            _run(call, *ops, alpha, beta)
    return result


def _batch_rungs(dtype: str) -> list[str]:
    """The rungs that run batched products of ``dtype`` in one launch (``supports_batch``)."""
    return [n for n in gemm_kernels_list() if supports_batch(REGISTRY[n]) and dtype in REGISTRY[n].dtypes]


def _each(a, b, out, batch, config, alpha, beta) -> None:
    """A batched product as one matmul (and launch) per product of the batch under kernel="auto", its operands
    broadcast."""
    na, nb = a.ndim - 2, b.ndim - 2
    for idx in np.ndindex(*batch):
        ia = tuple(0 if d == 1 else i for i, d in zip(idx[len(idx) - na :], a.shape[:na], strict=True))
        ib = tuple(0 if d == 1 else i for i, d in zip(idx[len(idx) - nb :], b.shape[:nb], strict=True))
        matmul(a[ia], b[ib], kernel="auto", config=config, out=out[idx], alpha=alpha, beta=beta)


def stacks(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """Whether an array of ``shape`` and ``strides`` (..., rows, cols) is its matrices one after another, row after
    row: its leading dimensions and rows collapse into one (dimensions of size 1 take any stride)."""
    step = None
    for n, s in zip(reversed(shape[:-1]), reversed(strides[:-1]), strict=True):
        if n == 1:
            continue
        if step is not None and s != step:
            return False
        step = s * n
    return True


def _stacked(x, cols: int):
    """``x`` (..., rows, cols) as one (batch * rows) x cols matrix when that is a view of it, else None. Decided from
    the strides first: a reshape that cannot be a view copies the whole array."""
    if not stacks(x.shape, x.strides):
        return None
    v = x.reshape(-1, cols)
    return v if _shares(v, x) else None


def _shares(view, x) -> bool:
    """Whether ``view`` (made by a reshape of ``x``) is a view of x's memory, not a copy."""
    return view.data.mem is x.data.mem and view.data.ptr == x.data.ptr


def _shapes(a, b) -> tuple[int, int, int, tuple[int, ...], tuple[int, ...]]:
    """(M, N, K, batch shape, result shape) of ``a @ b`` with numpy's matmul rules: the last two dimensions are
    the matrices, the others broadcast; a 1-D a is a row (its dimension is dropped from the result), a 1-D b a
    column (likewise)."""
    sa = (1, *a.shape) if a.ndim == 1 else a.shape
    sb = (*b.shape, 1) if b.ndim == 1 else b.shape
    M, K = sa[-2:]
    K2, N = sb[-2:]
    if K != K2:
        raise ValueError(
            f"shapes {a.shape} and {b.shape} do not align: a has {K} columns, b has {K2} rows"
            + (" (its last dimension)" if a.ndim != 2 or b.ndim != 2 else "")
        )
    ba, bb = sa[:-2], sb[:-2]
    batch = []
    for i in range(1, max(len(ba), len(bb)) + 1):
        x = ba[-i] if i <= len(ba) else 1
        y = bb[-i] if i <= len(bb) else 1
        if x != y and 1 not in (x, y):
            raise ValueError(
                f"batch dimensions do not broadcast: a's {ba} and b's {bb} differ at dimension {-i - 2} "
                f"({x} against {y}; each must be equal or 1)"
            )
        batch.append(max(x, y) if 0 not in (x, y) else 0)
    batch = tuple(reversed(batch))
    shape = batch + ((M,) if a.ndim != 1 else ()) + ((N,) if b.ndim != 1 else ())
    return M, N, K, batch, shape


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


def _decide_batched(a, b, out, batch, kernel, config, beta, dev, akind) -> tuple[Call, tuple] | None:
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
    spec = get_spec(kernel)
    in_place = spec.reads_transposed and supports_batch(spec)  # column-major batches read as they are
    a3, lda, bsa, ta = _batch_operand(a, batch, "a", in_place)
    b3, ldb, bsb, tb = _batch_operand(b, batch, "b", in_place)
    c3 = out.reshape(nb, M, N)
    s0, s1, s2 = c3.strides
    oi = c3.dtype.itemsize
    if not (s2 == oi or N <= 1) or not _shares(c3, out) or s1 % oi or s0 % oi or s1 // oi < N:
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
    plan = get_plan(kernel, config, flags, dev)
    if spec.schedules_batch and nb * math.prod(spec.grid(plan.cfg, M, N, K)) >= 2**31:
        raise ValueError(f"a batch of {nb} products of {M}x{N}x{K} has 2^31 tiles or more: split the batch")
    copied = not (_shares(a3, a) or bsa == 0 and a3.data.mem is a.data.mem) or not (
        _shares(b3, b) or bsb == 0 and b3.data.mem is b.data.mem
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
        direct=spec.tensor_maps is not None,  # maps go with the driver launch (Plan.launch has none)
    )
    return call, (a3, b3, c3)


def _decide(a, b, out, kernel, config, split_k, beta, dev, akind) -> Call:
    """Every decision for this call's key: kernel and configuration, repacking, split count, staging, strips."""
    M, K = a.shape
    N = b.shape[1]
    a_in, b_in = a, b
    dt, odt = a.dtype.name, out.dtype.name
    chosen = config is None  # cumm chooses the configuration (spec.shape_config, pitch_config may adjust it)
    kernel, config, split_k = _choose(kernel, config, split_k, dt, M, N, K, dev)
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
    plain = half or spec.tensor_maps is not None
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
    plan = get_plan(kernel, config, flags, dev)
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
        and _shares(a, a_in)
        and _shares(b, b_in)
    )
    grid = plan.spec.grid(plan.cfg, M, N, K)
    if grid[1] > 65535 or grid[2] > 65535:
        fast = False  # Plan.launch reports it
    copies = tuple(
        n for n, x, x_in, more in (("A", a, a_in, repack_a), ("B", b, b_in, repack_b)) if more or not _shares(x, x_in)
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


def _run(call: Call, a, b, c, alpha: float, beta: float) -> None:
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


def _run_decided(call: Call, a, b, out, alpha: float, beta: float, stream: int):
    """A cached call that is not a single launch: cupy views of the arrays, the kernels on ``stream``."""
    va, vb, vo = _arrays.as_cupy(a, "a"), _arrays.as_cupy(b, "b"), _arrays.as_cupy(out, "out")
    va = va[None, :] if va.ndim == 1 else va  # numpy's rules for vectors, as in _checked
    vb = vb[:, None] if vb.ndim == 1 else vb
    vo = vo.reshape(call.M, call.N)
    with _arrays.on_stream(stream, call.dev) if call.kind == "torch" else contextlib.nullcontext():
        _run(call, va, vb, vo, alpha, beta)
    return out
