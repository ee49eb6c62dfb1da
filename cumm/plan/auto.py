"""``kernel="auto"``: which kernel and configuration to run for a shape.

1. A configuration passed by the caller runs on ``top(cc)``, as given.
2. Otherwise the tuned tables (``cumm/tuned/*.json`` shipped with the package, then the user's
   ``tuned.json`` in the cache dir, which wins) are searched for this GPU (name and compute capability)
   and dtype; the entry whose shape is nearest in log2 space (within ``_store.MAX_DISTANCE``) gives
   the kernel and its configuration. See ``_store`` for the format and for how entries are made. A lower
   rung's entry is used only if it won a race against ``top(cc)`` as that rung's template is now (the entry's
   ``"raced"`` field, or the top rung's own entry at the same shape); one tuned before the top rung existed
   or changed is not: its winner never raced the rung the heuristic runs. An entry whose tiles fitted one wave
   where it was tuned (a branch rung's, or few tiles of a persistent rung's) serves a shape only while its grid
   there still does (``one_wave``).
3. Otherwise a heuristic: ``top(cc)`` with its default tiles when the grid fills the GPU, its smaller
   64 x 64 tiles (``SMALL_TILES``) when 128 x 128 tiles would give fewer than two blocks per multiprocessor (a
   persistent rung without a "small" configuration, wgmma_ws: of the named configurations whose tiles give at
   least half the multiprocessors a block, the one with the fewest rounds x tile area, ``_filling``); then the
   spec's shape rule (``shape_config``, applied by the caller) may trade 128 x 256 tiles for smaller ones.

``top(cc)`` is the highest rung whose spec says ``top`` that runs on compute capability ``cc`` (and takes the shape,
where its spec's ``top_shapes`` limits that): for float32 ``wgmma_f16x3`` on Hopper for products its rule takes
(three FP16 products of pieces split before the launch), else ``wgmma_tf32x3`` (three TF32 products), ``tf32x3``
where the GPU has TF32 tensor cores (8.0+: the same split on mma.sync), else the SIMT rung ``warptile``; for fp16
and bf16 ``wgmma_ws`` on Hopper, else ``mma_swizzled_pipeline``. A product that splits K takes the first of them
that can (wgmma_tf32x3 runs unsplit); a batched product, the first that runs batches (wgmma_tf32x3 does: 3-D maps).
A batch of fp16/bf16 products takes the entry tuned for one product as tall as the batch (``_half_batch``) when its
rung runs batches, else the dtype's top rung (wgmma_ws, which walks the batch's tiles as one run).

The split count (split-K, ``cumm/plan/splitk.py``) comes with the answer: the caller's ``split_k`` when given,
a tuned entry's optional ``"split_k"`` field (else 1), otherwise ``split_count``: slices of K when the
tile grid has fewer blocks than the GPU has multiprocessors and K is deep.

The answer of step 2 is memoized per (device, shape) (at most ``MEMO_MAX`` shapes), so the per-call path reads no
file and scans no table after the first call for a shape; ``clear_cache()`` forgets it (called whenever ``_store``'s
tables change).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping

from ..core.spec import cdiv
from ..ladder import REGISTRY
from ..ladder.registry import _BUILTIN
from ..runtime.driver import multiprocessors
from ..runtime.render import template_hash
from . import store as _store

# 64 x 64 tiles for grids that would not fill the GPU with the defaults: each spec's "small" configuration
SMALL_TILES = {n: dict(s.configs["small"]) for n, s in REGISTRY.items() if "small" in s.configs}
DTYPE = "float32"  # the default dtype of select() and the tuned lookups

# Split-K (split_count). Not yet tuned on a GPU: the depth floor keeps each slice's K loop long enough to
# amortize its prologue and epilogue, and caps the partial sums the reduction reads.
SPLIT_MIN_K = 512  # no split for shallower products
SPLIT_K_RATIO = 4  # ... nor unless K >= SPLIT_K_RATIO * max(M, N): the product is deep, not wide
SPLIT_MIN_DEPTH = 256  # each slice at least this deep (before rounding to whole slabs)
# From this depth the defaults' few tiles, their k-slabs shared out (stream-K), beat tiles of an eighth of their
# area; tiles under half of it hold out to twice this depth, larger ones to four times (_filling)
SHARE_OUT_K = 8192

_device_keys: dict[int, tuple[str, int]] = {}
_tuned: dict[tuple, tuple[str, dict[str, int], int] | None] = {}  # (device, dtype, M, N, K) -> answer
_named: dict[tuple, tuple[str, dict[str, int], int] | None] = {}  # (kernel, device, dtype, M, N, K) -> tuned answer
MEMO_MAX = 4096  # shapes remembered per memo (then it starts over): a server sees many token counts
_MISS = object()


def device_key(device_id: int) -> tuple[str, int]:
    """(GPU name, compute capability as an int such as 90) of ``device_id``; memoized."""
    key = _device_keys.get(device_id)
    if key is None:
        import cupy

        name = cupy.cuda.runtime.getDeviceProperties(device_id)["name"]
        name = name.decode() if isinstance(name, bytes) else str(name)
        key = _device_keys[device_id] = (name, int(cupy.cuda.Device(device_id).compute_capability))
    return key


def _memo(memo: dict, key: tuple, answer):
    """``memo[key]``, computed by ``answer()`` the first time; the memo starts over past MEMO_MAX shapes."""
    hit = memo.get(key, _MISS)
    if hit is _MISS:
        if len(memo) >= MEMO_MAX:
            memo.clear()
        hit = memo[key] = answer()
    return hit


def split_count(M: int, N: int, K: int, bm: int, bn: int, sms: int) -> int:
    """Slices of K for an M x N x K product on bm x bn tiles with ``sms`` multiprocessors (1: no split).

    Split only when the tile grid has fewer blocks than multiprocessors and K is deep (>= SPLIT_MIN_K and
    >= SPLIT_K_RATIO * max(M, N)); then about one wave (blocks * S <= sms), each slice >= SPLIT_MIN_DEPTH.
    """
    blocks = cdiv(M, bm) * cdiv(N, bn)
    if blocks >= sms or K < SPLIT_MIN_K or K < SPLIT_K_RATIO * max(M, N):
        return 1
    return max(1, min(sms // blocks, K // SPLIT_MIN_DEPTH))


def top(
    cc: int,
    batched: bool = False,
    split: bool = False,
    dtype: str = DTYPE,
    shape: tuple[int, int, int, int] | None = None,
) -> str:
    """The rung the heuristic (and a caller's bare configuration) runs for ``dtype`` on compute capability ``cc``:
    the highest of the ladder's rungs whose spec says ``top`` that takes ``dtype`` and runs on ``cc`` (and runs
    batches, or splits K, when asked; and takes ``shape``, (M, N, K, multiprocessors), when its spec's
    ``top_shapes`` limits the products it serves). The ladder's rungs only, as registered now (a replaced rung
    counts as its replacement); a kernel a user registers is run by name, never chosen by auto in its place."""
    for name in reversed(list(_BUILTIN)):
        spec = REGISTRY[name]
        if not (_BUILTIN[name].top and spec.kind == "gemm" and dtype in spec.dtypes and spec.supports(cc)):
            continue
        if spec.top_shapes is not None and (shape is None or not spec.top_shapes(*shape)):
            continue
        if (not batched or spec.batches) and (not split or spec.split_k):
            return name
    raise TypeError(
        f"no rung multiplies {dtype} arrays on compute capability {cc // 10}.{cc % 10}"
        + (" in batches" if batched else "")
        + (" split over K" if split else "")
    )


def _tile(cfg: Mapping[str, int] | None, name: str, kernel: str) -> int:
    """``name`` (BM or BN) of ``cfg`` over the kernel's defaults; 0 when not a positive int (get_plan reports it)."""
    v = (cfg or {}).get(name, REGISTRY[kernel].defaults[name])
    return v if isinstance(v, int) and v > 0 else 0


def _lookup(
    device_id: int, shape: tuple[int, int, int], kernel: str | None = None, dtype: str = DTYPE
) -> tuple[str, dict[str, int], int] | None:
    try:
        gpu, cc = device_key(device_id)
        best = top(cc, dtype=dtype, shape=(*shape, multiprocessors(device_id)))
        # the table's answers first: the nearest entry (of ``kernel``, when named), and auto's the top rung's own
        entry = _store.lookup(gpu, cc, dtype, *shape, kernel=kernel)
        at_top = _store.lookup(gpu, cc, dtype, *shape, kernel=best) if kernel is None else None
        if entry is not None and not one_wave(entry, shape, device_id):
            # a configuration chosen for few tiles serves nearby shapes only while its grid still fits in one wave
            # (bf16 2048 x 2048 x 8192 would have taken 1024 x 1024 x 8192's branch entry: 512 blocks of clusters;
            # 1024 x 3072 x 4096, 512 x 4096 x 4096's one-warpgroup 128 x 128 tiles: 192 of them, two rounds)
            entry = at_top
            if entry is not None and not one_wave(entry, shape, device_id):
                entry = None  # the heuristic: tiles for this shape
        if entry is not None and kernel is None and entry["kernel"] != best and not _raced(entry, best):
            # A table without the top rung at this shape predates it (tuned before the rung existed, or with
            # another template): its winner was never raced against the rung the heuristic would run.
            if at_top is None or _store.entry_shape(at_top) != _store.entry_shape(entry):
                return None
    except Exception as e:  # a broken table must never break matmul: fall back to the heuristic
        warnings.warn(
            f"cumm: tuned-table lookup failed ({type(e).__name__}: {e}); using the heuristic",
            RuntimeWarning,
            stacklevel=3,
        )
        return None
    if entry is None:
        return None
    splits = entry.get("split_k", 1)  # optional; a malformed value or a kernel without split-K: 1
    ok = isinstance(splits, int) and not isinstance(splits, bool) and splits >= 1 and REGISTRY[entry["kernel"]].split_k
    return entry["kernel"], dict(entry["config"]), splits if ok else 1


def one_wave(entry: Mapping, shape: tuple[int, int, int], device_id: int) -> bool:
    """False when ``entry``'s grid over the shape ``shape`` has more blocks than the device has multiprocessors, and the
    entry is a branch rung's (a win with few tiles) or a persistent rung's whose grid fitted one wave at the shape it
    was tuned at (its tiles chosen to fill the GPU once: one warpgroup's 128 x 128 or 64 x 64); True otherwise.
    On the H100 the one-warpgroup 128 x 128 tiles ran 0.64x cuBLAS at 1024 x 3000 x 4096 (192 of them, two rounds),
    where they won at 512 rows; the heuristic's tiles there ran 0.88x (0.97x since: 128 x 192 and CL = 2)."""
    return fits_one_wave(entry, shape, multiprocessors(device_id))


def fits_one_wave(entry: Mapping, shape: tuple[int, int, int], sms: int) -> bool:
    """:func:`one_wave` on a GPU of ``sms`` multiprocessors (scaled_matmul's tuned entries too)."""
    spec = REGISTRY.get(entry["kernel"])
    if spec is None or not (spec.branch or spec.persistent):
        return True

    def blocks(shape) -> int:
        gx, gy, gz = spec.grid(entry["config"], *shape)
        return gx * gy * gz

    if not spec.branch and blocks(_store.entry_shape(entry)) > sms:
        return True  # tuned for whole rounds: nearby shapes too
    return blocks(shape) <= sms


def _raced(entry: Mapping, kernel: str) -> bool:
    """Whether ``entry`` won a race against ``kernel`` as its template is now (the tuner's ``"raced"`` field, which
    only the winner of a race carries: rung -> template hash)."""
    raced = entry.get("raced")
    return isinstance(raced, dict) and raced.get(kernel) == template_hash(REGISTRY[kernel])


def select(
    M: int,
    N: int,
    K: int,
    device_id: int,
    config: Mapping[str, int] | None = None,
    split_k: int | None = None,
    batched: int = 0,
    dtype: str = DTYPE,
) -> tuple[str, Mapping[str, int] | None, int]:
    """(kernel name, configuration or None for the kernel's defaults, split count) for an M x N x K product
    (one product of a batch of ``batched`` when it is nonzero: then a rung that runs batches, unsplit).

    ``split_k`` (the caller's, already checked) wins over the table and the heuristic; a tuned entry for a
    kernel without split-K is skipped when split_k > 1 is asked for, one for a kernel without batches when
    batched. float16 and bfloat16: a tuned entry of that dtype, else ``top_for(dtype, cc)`` with the configuration
    it runs when named (its own nearest tuned entry: H200, bf16 512 x 4096 x 4096 ran 0.66x cuBLAS on its defaults
    when the nearest shape's winner was a lower rung, 0.87x on the entry tuned at 128 x 4096 x 4096); no split,
    no batch.
    """
    if dtype != DTYPE and batched:
        return _half_batch(M, N, K, device_id, config, batched, dtype)
    if config is None:
        hit = _memo(_tuned, (device_id, dtype, M, N, K), lambda: _lookup(device_id, (M, N, K), dtype=dtype))
        if dtype != DTYPE and hit is not None:
            return hit[0], hit[1], split_k
        if batched and hit is not None:
            hit = (hit[0], hit[1], 1) if REGISTRY[hit[0]].batches else None
        if hit is not None and (split_k is None or split_k == 1 or REGISTRY[hit[0]].split_k):
            return hit if split_k is None else (hit[0], hit[1], split_k)
    cc = device_key(device_id)[1]
    if dtype != DTYPE:  # the top rung, as it runs when named: its own nearest tuned entry, else its small rule
        best = top(cc, dtype=dtype)
        return best, config if config is not None else named(best, M, N, K, device_id, dtype=dtype), split_k
    # (a caller's configuration runs on the top rung that takes any product: its parameters are that rung's)
    work = None if batched or config is not None else (M, N, K, multiprocessors(device_id))
    kernel = top(cc, batched, split=split_k is not None and split_k > 1, shape=work)
    given = config is not None
    if not given:
        config = _small(kernel, M, N, K, device_id, max(1, int(batched)))
    if split_k is not None or batched:
        return kernel, config, 1 if batched else split_k
    bm, bn = _tile(config, "BM", kernel), _tile(config, "BN", kernel)
    splits = split_count(M, N, K, bm, bn, multiprocessors(device_id)) if bm and bn else 1
    if splits > 1 and not REGISTRY[kernel].split_k:  # deep and narrow: a rung that splits K
        kernel = top(cc, split=True)
        config = config if given else _small(kernel, M, N, K, device_id)
        bm, bn = _tile(config, "BM", kernel), _tile(config, "BN", kernel)
        splits = split_count(M, N, K, bm, bn, multiprocessors(device_id)) if bm and bn else 1
    return kernel, config, splits


def _half_batch(
    M: int, N: int, K: int, device_id: int, config: Mapping[str, int] | None, count: int, dtype: str
) -> tuple[str, Mapping[str, int] | None, int]:
    """select() for a batch of ``count`` half-precision products: a rung that runs batches, with the tiles tuned for
    one product ``count`` times as tall (wgmma_ws walks the batch's tiles as one run: the same tiles and work)."""
    if config is None:
        s = (M * count, N, K)
        hit = _memo(_tuned, (device_id, dtype, *s), lambda: _lookup(device_id, s, dtype=dtype))
        if hit is not None and REGISTRY[hit[0]].batches:
            return hit[0], hit[1], 1
    best = top(device_key(device_id)[1], dtype=dtype)
    return best, config if config is not None else named(best, M, N, K, device_id, count, dtype), 1


def _small(kernel: str, M: int, N: int, K: int, device_id: int, count: int = 1) -> Mapping[str, int] | None:
    """The kernel's "small" tiles when 128 x 128 tiles would give fewer than two blocks per multiprocessor; for a
    persistent kernel (one block per multiprocessor walks the tiles), when its default tiles are fewer than the
    multiprocessors (H100, 2048^3: wgmma_tf32x3's 256 default tiles ran at 93.7 TFLOP/s, its small ones at 76.8).
    ``count``: the products of a batch, whose tiles add up; ``K``: the depth, which _filling weighs."""
    spec = REGISTRY[kernel]
    if spec.persistent:
        tiles = count * cdiv(M, spec.defaults["BM"]) * cdiv(N, spec.defaults["BN"])
        if kernel not in SMALL_TILES:  # (a chain kernel named to matmul keeps None: get_plan says what it is)
            return _filling(spec, M, N, K, count, multiprocessors(device_id)) if spec.kind == "gemm" else None
        return SMALL_TILES.get(kernel) if tiles < multiprocessors(device_id) else None
    return SMALL_TILES.get(kernel) if count * cdiv(M, 128) * cdiv(N, 128) < 2 * multiprocessors(device_id) else None


def _filling(spec, M: int, N: int, K: int, count: int, sms: int) -> Mapping[str, int] | None:
    """A persistent kernel without a "small" configuration (wgmma_ws): its defaults when their tiles give at least
    half the multiprocessors a block (stream-K shares out a partial last wave), else, of the named configurations
    whose tiles do, the one whose rounds of tiles times tile area are least (the larger tiles on a tie), weighing
    only tiles of at least a quarter of the defaults' area while any of those does, else the one with the most
    tiles. Without a tuned entry on the H100 (bf16, bench x cuBLAS): 512 x 3072 x 4096 0.68 on the defaults' 48
    tiles, 0.91 on 128 x 128's 96; 512 x 3000 x 4096 0.82 and 1.03; but 1024 x 3000 x 4096 (96 default tiles) 0.88
    on the defaults and 0.64 on 128 x 128. On the H200 the tuner's winners follow the same rule: 64 x 64 at
    128 x 4096 x 4096 and 4096 x 128 x 4096, 128 x 128 at 512 x 4096 x 4096, 256 x 8192 x 8192 and 8192 x 256 x 8192.
    By rounds x area 192 x 64 beats 128 x 128 where its tiles fill a round the others leave part idle (3072 x 512:
    128 tiles against 96): H100, bf16 / fp16, 192 x 64 against 128 x 128, 3072 x 512 x 4096 0.88 / 0.81 and 0.91 /
    0.84, 768 x 1536 x 4096 0.85 / 0.75 and 0.84 / 0.77, 384 x 3072 x 4096 1.01 / 0.92 and 1.02 / 0.92; 2048 x 768 x
    4096 0.88 / 0.89 and 0.90 / 0.86. Tiles of an eighth of the defaults' area (64 x 64) load twice the bytes per
    product of 128 x 64 ones: by rounds x area they would win where they take three rounds against one.

    Small tiles do less work per byte they load: on a deep product that is not thin (M and N above the default BM)
    the defaults' few tiles with their k-slabs shared out over every block (a kernel with a workspace: stream-K) do
    better, from a depth that grows with the tile's area: SHARE_OUT_K for an eighth of the defaults' (64 x 64
    against 128 x 256), twice that under half of it (128 x 64, 192 x 64), four times for larger tiles. H100, bf16 x
    cuBLAS, against the defaults: 64 x 64 at 1024 x 1024 x 8192 0.67 / 0.83, 2048 x 512 x 8192 0.65 / 0.80, 256 x
    4096 x 16384 0.68 / 0.92, but 1024 x 1024 x 4096 0.66 / 0.66; 128 x 64 at 2048 x 512 x 8192 0.91 / 0.82, 256 x
    4096 x 8192 0.90 / 0.76, 1024 x 1024 x 8192 0.83-0.90 / 0.79-0.80, but 1024 x 1024 x 16384 0.85 / 0.93 and 512 x
    2048 x 16384 0.87 / 0.92. A thin product is bound by the other operand's traffic: 128 x 8192 x 8192 ran 0.99 on
    128 x 64, 0.87 on 64 x 64 and 0.78 on the defaults."""

    def tiles(over: Mapping[str, int]) -> int:
        cfg = {**spec.defaults, **over}
        return count * cdiv(M, cfg["BM"]) * cdiv(N, cfg["BN"])

    def area(over: Mapping[str, int]) -> int:
        cfg = {**spec.defaults, **over}
        return cfg["BM"] * cfg["BN"]

    def shares_out(over: Mapping[str, int]) -> bool:  # the defaults' shared-out slabs beat these tiles
        a, d = area(over), area({})
        depth = SHARE_OUT_K if 8 * a <= d else 2 * SHARE_OUT_K if 2 * a < d else 4 * SHARE_OUT_K
        return spec.workspace is not None and min(M, N) > spec.defaults["BM"] and K >= depth

    if not spec.configs or "BM" not in spec.defaults or 2 * tiles({}) >= sms:
        return None
    named = sorted(spec.configs.values(), key=area, reverse=True)
    fills = [c for c in named if 2 * tiles(c) >= sms and not shares_out(c)]
    weighed = [c for c in fills if 4 * area(c) >= area({})] or fills[:1]
    if weighed:  # min() keeps the first (larger) of equal costs
        return dict(min(weighed, key=lambda c: cdiv(tiles(c), sms) * area(c)))
    if any(shares_out(c) for c in named):  # the defaults' few tiles, their slabs shared out over every block
        return None
    return dict(max(named, key=lambda c: (tiles(c), -area(c))))  # most tiles, least padding


def named(
    kernel: str, M: int, N: int, K: int, device_id: int, count: int = 1, dtype: str = DTYPE
) -> dict[str, int] | None:
    """The configuration a named kernel runs without a ``config``: its tuned entry for this GPU, ``dtype`` and a
    nearby shape, else its "small" configuration when its default tiles (over the ``count`` products of a batch)
    would leave more than half the multiprocessors without a block, else None (the defaults). A kernel that walks
    a batch's tiles as one run (``schedules_batch``) takes the tiles of one product ``count`` times as tall."""
    if count > 1 and REGISTRY[kernel].schedules_batch:
        M, count = M * count, 1
    hit = _memo(_named, (kernel, device_id, dtype, M, N, K), lambda: _lookup(device_id, (M, N, K), kernel, dtype))
    if hit is not None:
        return dict(hit[1])
    spec = REGISTRY[kernel]
    if "BM" not in spec.defaults or "BN" not in spec.defaults:
        return None
    if spec.persistent:  # the rule auto uses for it (_small; _filling for one without a "small" configuration)
        small = _small(kernel, M, N, K, device_id, count)
        return dict(small) if small is not None else None
    small = spec.configs.get("small")
    if small is None:
        return None
    cfg = spec.default_config(device_key(device_id)[1])
    # Fewer blocks than half the multiprocessors: on the H200 the small tiles won at 1024^3 (double_buffer 27.5
    # against 11.1 TFLOP/s with its 32 default blocks, warptile 22.6 against 15.9 with 64) and lost at 2048^3
    # (double_buffer 28.2 against 45.2 with 128 blocks, warptile 34.2 against 44.3 with 256), python -m cumm bench.
    return dict(small) if 2 * count * cdiv(M, cfg["BM"]) * cdiv(N, cfg["BN"]) < multiprocessors(device_id) else None


# A fused epilogue deeper than a rung's epilogue_max_k still goes to it in the top rung's place (wgmma_pingpong: its
# epilogue under the other warpgroup's mainloop, where the top rung's runs between two mainloops) where the tuned table
# raced the two at this shape (entries of both at one shape within TIE_DISTANCE log2 units) and its plain product ran
# within EPILOGUE_TIE of the top rung's: there the epilogue hidden outweighs the gap. H200, bf16, x auto's plain
# product, 3 runs of 9 interleaved rounds, wgmma_ws -> this route (wgmma_pingpong 128 x 128 with its 4096^3 entry,
# STAGES 4, GM 4, 1.0027x wgmma_ws's time there): 4096^3 bias 1.038 -> 1.017, silu 1.038 -> 1.014, bias + gelu_tanh
# 1.068 -> 1.046, snippet silu 1.074 -> 1.033; 4096 x 4096 x 3584 1.035 -> 1.029, 1.035 -> 1.004, 1.079 -> 1.055.
# By name where its plain product ran 2-3 % slower it lost (2048 x 8192 x 4096: silu 1.024 -> 1.044, bias +
# gelu_tanh 1.072 -> 1.083), and with its defaults (STAGES 6, GM 8) at 4096^3 (bias + gelu_tanh 1.077 against 1.056).
EPILOGUE_TIE = 1.01
TIE_DISTANCE = 0.5


def epilogue_tie(kernel: str, M: int, N: int, K: int, device_id: int, dtype: str) -> tuple[str, dict[str, int]] | None:
    """(rung, its tuned configuration) for a fused epilogue K deep on the top rung ``kernel``, where a rung that takes
    fused epilogues in its place at shorter K (``KernelSpec.epilogue_max_k`` below K) ran a plain product within
    EPILOGUE_TIE of ``kernel``'s in the tuned table at this shape (see above); else None (no such entries, or no
    device facts)."""
    try:
        gpu, cc = device_key(device_id)
        at_top = _store.lookup(gpu, cc, dtype, M, N, K, TIE_DISTANCE, kernel=kernel)
        if at_top is None:
            return None
        for name, s in REGISTRY.items():
            if not 0 < s.epilogue_max_k < K or s.top or dtype not in s.dtypes or not s.supports(cc):
                continue
            e = _store.lookup(gpu, cc, dtype, M, N, K, TIE_DISTANCE, kernel=name)
            same = e is not None and _store.entry_shape(e) == _store.entry_shape(at_top)
            if same and e["ms"] <= EPILOGUE_TIE * at_top["ms"]:
                return name, dict(e["config"])
    except Exception:  # (a broken table is reported by auto's own lookup): the route as without the table
        return None
    return None


def clear_cache() -> None:
    """Forget memoized tuned answers (after a table changed); device facts stay cached."""
    _tuned.clear()
    _named.clear()


_store.on_change(clear_cache)
