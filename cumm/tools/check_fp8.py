"""``cumm check`` with an FP8 C (``out_dtype=``, ``--out-dtype``): the case's bfloat16 / float16 operands as torch
views of the same memory, C a torch float8_e4m3fn / float8_e5m2 view inside a byte buffer of guard bands, written
as fp8(scale_result * v) by the fused epilogue (docs/beyond.md, "FP8 output with a scale"). The reference is the
float64 result times the scale, clamped to the format's largest finite value: C is right when its error against that
is within 1.5 times the error of the format's own rounding of it (the exact answer cast; a float32 v differs from
float64 only where a value lies on a rounding boundary)."""

from __future__ import annotations

from .guard_bands import GUARD_ROWS

OUT_DTYPES = ("float8_e4m3fn", "float8_e5m2")  # (cumm.core.dtypes.FP8's formats, as torch names them)
POISON = 0xFF  # C's bytes before the call: NaN in both formats, so an element never written stays NaN
SENTINEL = 0x5A  # the guard bands' byte (a finite value in both formats)
LEFT = 16  # guard columns (bytes) left of C: C's rows start 16-byte aligned (the copy engine's stores need it)


def default_dtypes(spec_dtypes, out_dtype: str | None) -> list[str]:
    """The dtypes a check runs by default: the spec's, with an FP8 C its 16-bit ones (none: all of them, so that
    check_args says what the others write)."""
    half = [d for d in spec_dtypes if d in ("bfloat16", "float16")]
    return list(spec_dtypes) if out_dtype is None or not half else half


def check_args(out_dtype: str | None, dtypes, scale_result) -> None:
    """ValueError, before the GPU is touched, for an FP8 C cumm check cannot run."""
    if out_dtype is None:
        if scale_result is not None:
            raise ValueError("scale_result scales an FP8 C: give out_dtype='float8_e4m3fn' or 'float8_e5m2' with it")
        return
    if out_dtype not in OUT_DTYPES:
        raise ValueError(f"out_dtype {out_dtype!r} is not an FP8 C cumm writes; choose {' or '.join(OUT_DTYPES)}")
    wide = [d for d in dtypes if d not in ("bfloat16", "float16")]
    if wide:
        raise ValueError(
            f"an FP8 C ({out_dtype}) is the cast ending a bfloat16 or float16 product's epilogue; {wide[0]} inputs "
            "write their own dtype (cumm.scaled_matmul takes FP8 inputs)"
        )
    if scale_result is not None and not (isinstance(scale_result, int | float) and 0 < scale_result < float("inf")):
        raise ValueError(f"scale_result is a positive finite number, got {scale_result!r}")
    try:
        import torch  # noqa: F401
    except ImportError as e:
        raise ValueError("an FP8 C is a torch tensor: cumm check --out-dtype needs torch (pip install torch)") from e


def guarded_out(M: int, N: int, out_dtype: str, odd: bool, batch: int = 0):
    """(buffer, C, C as torch): C an M x N byte view of a buffer of SENTINEL bytes (GUARD_ROWS rows above and
    below, LEFT columns left, at least LEFT right, a leading dimension of whole 16 bytes or with ``odd`` one byte
    more), filled with POISON; the third is the torch FP8 view of C's memory."""
    import cupy
    import torch

    right = LEFT + (-(2 * LEFT + N) % 16) + (1 if odd else 0)
    lead = (batch,) if batch else ()
    buf = cupy.full((*lead, GUARD_ROWS + M + GUARD_ROWS, LEFT + N + right), SENTINEL, dtype=cupy.uint8)
    c = buf[..., GUARD_ROWS : GUARD_ROWS + M, LEFT : LEFT + N]
    c[...] = POISON
    return buf, c, torch.from_dlpack(c).view(getattr(torch, out_dtype))


def as_torch(x):
    """A torch view of a cupy bfloat16 / float16 array's memory (shape and strides kept)."""
    import cupy
    import torch

    dt = torch.bfloat16 if x.dtype.name == "bfloat16" else torch.float16
    return torch.from_dlpack(x.view(cupy.uint16)).view(dt)


def scale_tensor(scale_result: float | None):
    """scale_result as matmul takes it (a float32 one-element torch tensor), or None (matmul's default 1)."""
    if scale_result is None:
        return None
    import torch

    return torch.tensor(float(scale_result), dtype=torch.float32, device="cuda")


def compare(tc, ref, out_dtype: str, scale_result: float | None):
    """(C in float64, the reference C should be near, the tolerance of their relative Frobenius error): the
    reference is scale_result * ref clamped to the format's range, the tolerance 1.5 times the relative error of its
    cast to the format (plus 1e-6: a reference the format holds exactly)."""
    import cupy
    import torch

    fmt = getattr(torch, out_dtype)
    fmax = torch.finfo(fmt).max
    sref = cupy.clip(ref * (1.0 if scale_result is None else float(scale_result)), -fmax, fmax)
    cast = cupy.from_dlpack(torch.from_dlpack(sref).to(fmt).to(torch.float64))
    den = float(cupy.linalg.norm(sref))
    own = float(cupy.linalg.norm(cast - sref)) / den if den else 0.0
    return cupy.from_dlpack(tc.to(torch.float64)), sref, 1.5 * own + 1e-6
