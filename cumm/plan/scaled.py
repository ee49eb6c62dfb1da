"""Decisions of cumm.scaled_matmul (FP8): which formats multiply, what the scales' shapes mean, which rung runs
(through the specs' ``dtypes``, ``top`` and ``scales``), its configuration (a tuned entry, else the rules), and
whether an operand is read in place or copied. Pure functions of shapes, strides, dtype names and the tuned tables:
the CPU tests call them directly."""

from __future__ import annotations

import warnings
from collections.abc import Mapping

from ..core.dtypes import FP8, FP8_DTYPE, SCALED_OUT
from ..core.errors import ConfigError
from ..core.spec import KernelSpec, cdiv
from ..ladder import REGISTRY
from ..ladder.common import FP8_FORMATS, FP8_OUTPUTS, FP8_SLAB
from . import store as _store
from .auto import fits_one_wave

TMA_ALIGN = 16  # bytes: the copy engine's row pitch and base address (K % 16 == 0 for K-major FP8 rows)
# Rounds of tiles (a tile per multiprocessor each) from which promoted products take three warpgroups' 192 x 128
# tiles: H100, x torch._scaled_mm, 8192^3 (21 rounds) 0.957 -> 0.998, 8192 x 14336 x 4096 (36) 0.983 both,
# 4096^3 (5.3) 0.995 -> 0.896
MANY_ROUNDS = 16
FORMAT_FIELDS = ("FA", "FB", "OUT")  # a configuration's formats and C's type: set per call, not stored when tuned


def check_formats(da: str, db: str) -> None:
    """TypeError unless both inputs are FP8 (any of the four pairs: Hopper's wgmma has e4m3 and e5m2 for A and B
    independently, e5m2 x e5m2 included; torch._scaled_mm / cuBLAS refuse that one pair)."""
    fp8 = [d in FP8 for d in (da, db)]
    if all(fp8):
        return
    if any(fp8):
        other = db if fp8[0] else da
        raise TypeError(
            f"scaled_matmul multiplies two FP8 tensors; got {da} @ {db}: FP8 mixed with {other}. Quantize both "
            f"(x.to(torch.float8_e4m3fn) with a scale) or use cumm.matmul for {other}"
        )
    raise TypeError(
        f"scaled_matmul takes FP8 inputs ({', '.join(FP8)}), got {da} @ {db}; "
        "for float32 / float16 / bfloat16 use cumm.matmul"
    )


def out_name(out_dtype: str | None) -> str:
    if out_dtype is None:
        return "bfloat16"
    if out_dtype not in SCALED_OUT:
        raise TypeError(f"out_dtype must be one of {', '.join(SCALED_OUT)} (FP32 accumulation), got {out_dtype}")
    return out_dtype


def check_scale_result(out: str, given: bool) -> None:
    """scale_result (the factor C is multiplied by before its cast to FP8, as torch._scaled_mm's) belongs to an FP8
    ``out`` only: TypeError naming the fix otherwise. (An FP8 out without one is scaled by 1, as torch's.)"""
    if given and out not in FP8:
        raise TypeError(
            f"scale_result scales an FP8 output before its cast (out_dtype=torch.float8_e4m3fn or "
            f"torch.float8_e5m2); this call writes {out}: drop scale_result (torch._scaled_mm ignores it for "
            f"{out}), or pass an FP8 out_dtype"
        )


def scale_layout(M: int, N: int, K: int, sa_shape: tuple, sb_shape: tuple) -> str:
    """ "tensor" (each scale one number, or scale_a (M, 1) per row of A, scale_b (1, N) per column of B: as
    torch._scaled_mm) or "block" (scale_a (M, ceil(K/128)) per 1 x 128 block of A, scale_b (ceil(N/128),
    ceil(K/128)) per 128 x 128 block of B: DeepSeek-V3); ValueError naming the accepted shapes otherwise."""

    def numel(s: tuple) -> int:
        n = 1
        for d in s:
            n *= d
        return n

    kb, nb = cdiv(K, FP8_SLAB), cdiv(N, FP8_SLAB)
    a_tensor = numel(sa_shape) == 1 or tuple(sa_shape) == (M, 1)
    b_tensor = numel(sb_shape) == 1 or tuple(sb_shape) == (1, N)
    if a_tensor and b_tensor:
        return "tensor"
    if tuple(sa_shape) == (M, kb) and tuple(sb_shape) == (nb, kb):
        return "block"
    raise ValueError(
        f"scale shapes {tuple(sa_shape)} (scale_a) and {tuple(sb_shape)} (scale_b) do not fit a {M} x {K} @ {K} x {N} "
        f"product; accepted: per-tensor (one element each), per-row / per-column (scale_a ({M}, 1), scale_b (1, {N})),"
        f" or block scales (scale_a ({M}, {kb}) per 1 x {FP8_SLAB} block, scale_b ({nb}, {kb}) per {FP8_SLAB} x "
        f"{FP8_SLAB} block)"
    )


def choose(kernel: str, da: str, db: str, layout: str) -> KernelSpec:
    """The rung: ``kernel`` by name (it must apply ``layout``'s scales), or for "auto" the last top rung whose
    dtypes hold both formats and whose ``scales`` is ``layout``."""
    if kernel == "auto":
        fits = [s for s in REGISTRY.values() if s.top and s.scales == layout and da in s.dtypes and db in s.dtypes]
        if not fits:
            raise ConfigError(f"no kernel applies {layout} scales to {da} @ {db}")
        return fits[-1]
    spec = REGISTRY.get(kernel)
    scaled = [n for n, s in REGISTRY.items() if s.scales]
    if spec is None or not spec.scales:
        raise ValueError(f"kernel {kernel!r} is not a scaled FP8 kernel; scaled_matmul runs 'auto' or one of {scaled}")
    if spec.scales != layout:
        raise ValueError(
            f"kernel {kernel!r} applies {spec.scales} scales, and these are {layout} scales; use kernel='auto' or "
            + str([n for n, s in REGISTRY.items() if s.scales == layout])
        )
    return spec


def configure(
    spec: KernelSpec,
    da: str,
    db: str,
    out: str,
    M: int,
    N: int,
    fast_accum: bool,
    sms: int,
    config: Mapping[str, int] | None = None,
    *,
    K: int = 1,
    device: tuple[str, int] | None = None,
) -> tuple[dict[str, int], str]:
    """(the configuration, where it came from): the formats and C's type (FA, FB, OUT; EPI = 0 for an FP8 C) over
    ``config`` when given ("config"); else, for use_fast_accum=False on ``device`` (GPU name, compute capability),
    the rung's tuned entry for the nearest tuned shape (:func:`tuned`; "tuned at MxNxK"); else the spec's
    "fast_accum" configuration for use_fast_accum=True ("fast_accum"), three consumer warpgroups of 192 x 128 tiles
    ("three_warpgroups_192x128") for a promoted product of at least MANY_ROUNDS rounds of them, one consumer
    warpgroup of 64-row tiles (its "one_warpgroup_64x128") when 128-row tiles would leave more than half the
    multiprocessors idle, or the defaults ("defaults")."""
    codes = FP8_FORMATS.index(da), FP8_FORMATS.index(db), FP8_OUTPUTS.index(out)
    fixed = dict(zip(FORMAT_FIELDS, codes, strict=True))
    if out in FP8:
        fixed["EPI"] = 0  # FP8 C is stored directly (include/fp8_out.cuh): no staging tile, no C map
    if config is not None:
        return spec.resolve({**dict(config), **fixed}), "config"
    entry = tuned(spec, M, N, K, sms, device) if device is not None and not fast_accum else None
    if entry is not None:
        where = "x".join(map(str, _store.entry_shape(entry)))
        try:
            return spec.resolve({**entry["config"], **fixed}), f"tuned at {where}"
        except ConfigError:
            pass  # (a tiling these formats or this output cannot run: the rules)
    over = spec.configs["fast_accum"] if fast_accum and "fast_accum" in spec.configs else {}
    cfg, why = spec.resolve({**over, **fixed}), "fast_accum" if over else "defaults"
    wide = spec.configs.get("three_warpgroups_192x128")
    w = {**spec.defaults, **(wide or {})}
    if not fast_accum and wide is not None and cdiv(M, w["BM"]) * cdiv(N, w["BN"]) >= MANY_ROUNDS * sms:
        cfg, why = spec.resolve({**wide, **fixed}), "three_warpgroups_192x128"
    if 2 * cdiv(M, cfg["BM"]) * cdiv(N, cfg["BN"]) < sms and "one_warpgroup_64x128" in spec.configs:
        cfg, why = spec.resolve({**spec.configs["one_warpgroup_64x128"], **fixed}), "one_warpgroup_64x128"
    return cfg, why


def tuned(spec: KernelSpec, M: int, N: int, K: int, sms: int, device: tuple[str, int]) -> dict | None:
    """``spec``'s tuned entry (dtype FP8_DTYPE) for the shape nearest M x N x K on ``device`` (store.lookup: a
    configuration the spec's constraints reject is not usable), when it promotes (PROMO among the forms the tuner
    searches: 1, 2) and its grid fits one wave here if it did at its own shape (auto.fits_one_wave, as for the
    half rungs); else None (a broken table is warned about)."""
    try:
        entry = _store.lookup(*device, FP8_DTYPE, M, N, K, kernel=spec.name)
        if entry is None or entry["config"].get("PROMO") not in spec.space["PROMO"]:
            return None
        return entry if fits_one_wave(entry, (M, N, K), sms) else None
    except Exception as e:  # a broken table must never break scaled_matmul: the rules decide
        warnings.warn(f"cumm: FP8 tuned-table lookup failed ({type(e).__name__}: {e}); using the rules", stacklevel=2)
        return None


def readable(ptr: int, ld: int, inner_stride: int, K: int) -> bool:
    """Whether the copy engine reads an FP8 operand's K-major rows in place: unit stride along K, rows 16-byte
    aligned (pointer and pitch). Otherwise scaled_matmul copies it into a zero-padded (rows x round_up(K, 16))
    buffer first (one read and one write of the operand)."""
    return inner_stride == 1 and ptr % TMA_ALIGN == 0 and ld % TMA_ALIGN == 0 and ld >= K
