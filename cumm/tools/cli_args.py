"""The command line's argument parser (:func:`build_parser`: the subcommands bench, tune, check and new, and the
options they share) and the argument types that check each value and say what would be right.

Apart from the dispatch (:mod:`.cli`), which runs a subcommand once its arguments are parsed. Parsing needs no GPU
and no CuPy, so ``--help``, ``--version`` and argument errors work anywhere: this module imports nothing that needs
CuPy.
"""

from __future__ import annotations

import argparse
import sys

from ..core.dtypes import FP8_DTYPE
from ..ladder import gemm_kernels
from ..runtime import timing as _timing
from .check_fp8 import OUT_DTYPES

# The named activations (--activation, --glu): plan/epilogue.py ACTIVATIONS' keys, in its order. Not imported from
# there: that module imports CuPy, and --help, --version and argument errors must work without it
# (tests/test_glu_tools.py keeps the two equal).
ACTIVATION_NAMES = ("relu", "gelu", "gelu_tanh", "silu")

DESCRIPTION = (
    "cumm: GEMM kernels written as CUDA source templates and compiled at run time by NVRTC through CuPy, in "
    "FP32, 3xTF32, float16 and bfloat16, a ladder from a naive kernel to Hopper wgmma; cumm.matmul(a, b) "
    "multiplies CuPy or torch arrays. These commands time the kernels against cuBLAS, tune their tiles, check "
    "them on odd shapes, and start a kernel of your own."
)


def _kernel_list(text: str) -> list[str]:
    valid = [*gemm_kernels(), "auto"]
    names = [k.strip() for k in text.split(",") if k.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"no kernel given; choose from {', '.join(valid)}")
    for k in names:
        if k not in valid:
            raise argparse.ArgumentTypeError(f"unknown kernel {k!r}; choose from {', '.join(valid)}")
    return list(dict.fromkeys(names))


_DTYPES = {
    "fp32": "float32",
    "float32": "float32",
    "fp16": "float16",
    "float16": "float16",
    "bf16": "bfloat16",
    "bfloat16": "bfloat16",
}


def _dtype_or_fp8(text: str) -> str:
    """bench's and tune's dtypes: the matmul ones and fp8 (cumm.scaled_matmul's FP8 rungs)."""
    if text in (FP8_DTYPE, "float8", "float8_e4m3fn"):
        return FP8_DTYPE
    if text not in _DTYPES:
        raise argparse.ArgumentTypeError(f"unknown dtype {text!r}; choose fp32, fp16, bf16 or fp8")
    return _DTYPES[text]


def _size_list(text: str) -> list[int]:
    bad = argparse.ArgumentTypeError(f"malformed sizes {text!r}: expected positive integers like 1024,4096")
    try:
        sizes = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise bad from None
    if not sizes or min(sizes) <= 0:
        raise bad
    return sizes


def _rungs(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in gemm_kernels()]
    if not names:
        raise argparse.ArgumentTypeError(f"give rungs as A,B,...; the rungs: {', '.join(gemm_kernels())}")
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown rungs {unknown}; the rungs: {', '.join(gemm_kernels())}")
    return names


def _shape(text: str) -> tuple[int, int, int]:
    from .bench_rows import parse_shape

    try:
        return parse_shape(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _shape_list(text: str) -> list[tuple[int, int, int]]:
    return [_shape(s) for s in text.split(",") if s.strip()] or [_shape(text)]


def _suite(text: str):
    from .suite import SuiteError, load

    try:
        return load(text)
    except SuiteError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _seconds(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        v = -1.0
    if not 0 <= v <= 60:
        raise argparse.ArgumentTypeError(f"expected seconds from 0 to 60, got {text!r}")
    return v


def _beta(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a finite number such as 0.5 or 1, got {text!r}") from None
    from .bench_rows import check_beta

    try:
        return check_beta(v)  # one rule for the CLI and cumm.bench
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"{e} (from {text!r})") from None


def _positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return n


def _config(text: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        key, eq, value = part.partition("=")
        try:
            if not eq or not key.strip().isidentifier():
                raise ValueError
            out[key.strip()] = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"malformed configuration {text!r}: expected P=V pairs such as BK=16,STAGES=3"
            ) from None
    return out


def _fp8_out(p: argparse.ArgumentParser, beta_note: str) -> None:
    """--out-dtype and --scale-result: an FP8 C (check and bench alike)."""
    p.add_argument(
        "--out-dtype",
        choices=OUT_DTYPES,
        default=None,
        help="an FP8 C: fp8(S * v) after the epilogue, against float64 scaled and clamped, within 1.5x the "
        f"format's own rounding error; bf16 and fp16 inputs, {beta_note} (needs torch)",
    )
    p.add_argument("--scale-result", type=float, default=None, metavar="S", help="the FP8 C's scale S (default 1)")


def build_parser(prog: str = "cumm") -> argparse.ArgumentParser:
    kernels = ", ".join(gemm_kernels())
    # the package's version: the package is loaded before any of its modules (no import of it from here)
    version = sys.modules[__name__.partition(".")[0]].__version__
    p = argparse.ArgumentParser(prog=prog, description=DESCRIPTION)
    p.add_argument("--version", action="version", version=f"cumm {version}")
    sub = p.add_subparsers(dest="command", required=True, metavar="{bench,tune,check,new}")

    b = sub.add_parser(
        "bench",
        help="time kernels against cuBLAS at the same dtype and print a table",
        description="Time kernels against cuBLAS at the same dtype (cupy.matmul in FP32; torch.matmul for float16 "
        "and bfloat16): CUDA events, median of runs after warm-up, each call settled alone first, "
        "operands rotated past the L2 cache, each result checked against float64 first (wrong -> FAIL); "
        "--beta times the in-place C = A @ B + beta C. Prints the table to stdout; exits 1 if a kernel FAILs.",
    )
    b.add_argument(
        "--kernels",
        type=_kernel_list,
        default=None,
        metavar="K1,K2",
        help=f"kernels to time (default: all). Choices: {kernels}, auto",
    )
    b.add_argument(
        "--sizes",
        type=_size_list,
        default=None,
        metavar="S1,S2",
        help="square sizes M = N = K (default 1024,2048,4096 when neither --sizes nor --shapes is given)",
    )
    b.add_argument(
        "--shapes",
        type=_shape_list,
        default=None,
        metavar="MxNxK,...",
        help="additional arbitrary shapes, e.g. 4096x1024x512",
    )
    b.add_argument(
        "--repeat",
        type=_positive,
        default=_timing.DEFAULT_REPEAT,
        metavar="N",
        help=f"timed runs per kernel and shape (default {_timing.DEFAULT_REPEAT}; slow kernels stop after "
        f"about {_timing.BUDGET_S:g} s but run at least {_timing.MIN_RUNS} times)",
    )
    b.add_argument(
        "--settle",
        type=_seconds,
        default=_timing.SETTLE_S,
        metavar="S",
        help=f"seconds each call runs alone before its samples in every round (default {_timing.SETTLE_S:g}): at "
        "the power limit a card's clock follows what it just ran",
    )
    b.add_argument("--json", metavar="PATH", help="write results and device information as JSON")
    b.add_argument("--markdown", metavar="PATH", help="write the table as markdown")
    b.add_argument("--plot", metavar="PATH", help="plot TFLOP/s against size (needs matplotlib: cumm[plot])")
    b.add_argument(
        "--dtype",
        type=_dtype_or_fp8,
        default="float32",
        metavar="DTYPE",
        help="fp32 (default; cuBLAS via cupy.matmul in FP32), fp16 or bf16 (the rungs for that dtype; "
        "cuBLAS via torch.matmul at the same dtype, FP32 accumulation), or fp8 (cumm.scaled_matmul's FP8 rungs, "
        "e4m3, beside torch._scaled_mm and cumm's bf16 rung; --shapes or the FP8 issue's shapes; needs torch)",
    )
    b.add_argument(
        "--beta",
        type=_beta,
        default=0.0,
        metavar="BETA",
        help="time C = A @ B + BETA * C in place instead of C = A @ B (default 0): cumm.matmul(..., beta=BETA), "
        "cuBLAS via cupy.cublas.gemm (fp32) or torch.Tensor.addmm_ (fp16, bf16) with the same beta; C "
        "accumulates across the timed calls (the work does not depend on the value)",
    )
    b.add_argument(
        "--grouped",
        action="store_true",
        help="time cumm.grouped_matmul (bf16 mixture-of-experts shapes: 8 and 64 experts, N x K 4096 x 7168 and "
        "7168 x 2048, balanced and skewed tokens) beside torch._grouped_mm and a loop of per-group cuBLAS calls "
        "(needs torch)",
    )
    b.add_argument(
        "--suite",
        type=_suite,
        default=None,
        metavar="NAME|FILE.json",
        help="time a shape suite instead of --sizes/--shapes: 'llm' (squares, Llama-3-8B layers at 16 to 8192 "
        "tokens, decode, short-and-deep, attention batches, odd sizes) or a suite file of your own; --kernels "
        "defaults to auto; the table ends with the geomean and the minimum ratio to cuBLAS",
    )
    b.add_argument(
        "--runs",
        type=_positive,
        default=1,
        metavar="N",
        help="with --suite: run the whole suite N times, one after another, and report each shape's median ratio "
        "over the runs (each run's beside it): at the power limit a ratio moves a few percent between runs "
        "(default 1)",
    )
    b.add_argument(
        "--overhead",
        action="store_true",
        help="also measure host overhead per call: cumm.matmul vs cupy.matmul on 64x64x64",
    )

    t = sub.add_parser(
        "tune",
        help="search tile configurations for a kernel and shape",
        description="Search tile configurations: --kernel with --shape; --shape alone races the top rungs of the dtype "
        "(as --standard does, which tunes the standard set) and keeps each rung's best per shape, the winner marked.",
    )
    t.add_argument("--kernel", choices=gemm_kernels(), metavar="KERNEL", help=f"kernel to tune; one of {kernels}")
    t.add_argument(
        "--shape", type=_shape, action="append", default=[], metavar="MxNxK", help="shape to tune for (repeatable)"
    )
    t.add_argument("--standard", action="store_true", help="tune the standard kernels and shapes")
    t.add_argument(
        "--suite",
        metavar="NAME|FILE.json",
        help="tune the shapes a suite times (bench --suite), a batch as one product that many times as tall",
    )
    t.add_argument(
        "--rungs",
        type=_rungs,
        default=None,
        metavar="A,B,...",
        help="race these rungs instead of all the dtype's top rungs (the top rung among them, for auto to trust a "
        "lower rung's win)",
    )
    t.add_argument(
        "--dtype",
        type=_dtype_or_fp8,
        default="float32",
        help="fp32 (default), fp16 or bf16: the rungs for that dtype are raced, entries saved for it; fp8: each FP8 "
        "rung tuned on e4m3 x e4m3 with bf16 out through scaled_matmul, its entry serving every format and output",
    )
    t.add_argument(
        "--max-configs",
        type=_positive,
        default=None,
        metavar="N",
        help="try at most N configurations per kernel and shape",
    )
    t.add_argument(
        "--budget",
        type=float,
        default=None,
        metavar="S",
        help="seconds per shape (default 150; also CUMM_TUNE_BUDGET_S)",
    )
    t.add_argument(
        "--out",
        metavar="PATH",
        help="also merge the results into this table, e.g. cumm/tuned/h200.json (also CUMM_TUNE_OUT)",
    )
    t.add_argument(
        "--plan",
        action="store_true",
        help="no GPU: print the configurations an H200 would time (compiled offline unless --no-compile)",
    )
    t.add_argument("--no-compile", action="store_true", help="with --plan: skip the offline compiles")
    c = sub.add_parser(
        "check",
        help="run a kernel on odd shapes against float64, with guard bands around the output",
        description="Run kernels through cumm.matmul on the standard odd shapes (1x1x1, primes, 4097x33x65, K = 1, "
        "K = 7, M = 1, N = 1, unaligned views, alpha and beta, 2048^3, rows off 32 bytes; two batches for a kernel "
        "that runs them) against float64, the output NaN-filled and surrounded by guard values that reveal writes "
        "outside it. "
        "Exits 1 if a case fails.",
    )
    c.add_argument(
        "--kernel",
        type=_kernel_list,
        default=None,
        metavar="K1,K2",
        help="kernels to check (default: those the --kernel-file registers)",
    )
    c.add_argument(
        "--config",
        type=_config,
        default=None,
        metavar="P=V,...",
        help="parameters to override, e.g. BK=16,STAGES=3 (default: what cumm.matmul picks)",
    )
    c.add_argument(
        "--shapes", type=_shape_list, default=None, metavar="MxNxK,...", help="these shapes instead of the standard set"
    )
    c.add_argument(
        "--sanitize",
        action="store_true",
        help="run again under compute-sanitizer --tool memcheck (without the 2048^3 case)",
    )
    _fp8_out(c, "the beta cases left out")
    n = sub.add_parser(
        "new",
        help="write NAME/kernel.cu and NAME/spec.py: a rung's folder, ready to edit",
        description="Start a kernel of your own from a rung: NAME/kernel.cu is the rung's template, NAME/spec.py its "
        "spec (registered when the file is imported). Then: cumm check --kernel-file NAME/spec.py; "
        "cumm bench --kernel-file NAME/spec.py --kernels RUNG,NAME.",
    )
    n.add_argument("name", help="the new kernel's name (an identifier)")
    n.add_argument(
        "--from",
        dest="rung",
        default="double_buffer",
        metavar="RUNG",
        help=f"the rung to start from (default double_buffer); one of {kernels}",
    )
    n.add_argument("--dir", default=".", metavar="DIR", help="where to write the files (default: here)")
    n.add_argument("--force", action="store_true", help="overwrite NAME/kernel.cu and NAME/spec.py if they exist")
    for sp in (b, c):  # a fused epilogue (cumm/plan/epilogue.py), verified against its float64 reference
        sp.add_argument(
            "--epilogue",
            default=None,
            metavar="SNIPPET",
            help="run the cumm kernels with this epilogue: CUDA statements over the float v, row, col, e.g. "
            "'v = v / (1.0f + __expf(-v));' (needs --reference)",
        )
        sp.add_argument(
            "--activation",
            default=None,
            choices=ACTIVATION_NAMES,
            help="run the cumm kernels with this fused activation (before --epilogue)",
        )
        sp.add_argument(
            "--reference",
            default=None,
            metavar="EXPR",
            help="the epilogue's float64 meaning: a Python expression over v, row, col with cp, exp, tanh, erf, "
            "sqrt, maximum, e.g. 'v / (1 + exp(-v))'",
        )
    b.add_argument(
        "--glu",
        default=None,
        choices=ACTIVATION_NAMES,
        help="race the gated MLP ACT(x @ w1) * (x @ w3) fused, cumm.matmul(x, cumm.glu_weight(w1, w3), glu=ACT), "
        "beside torch's unfused two products and elementwise (the 'unfused' row: ratios are against it; needs "
        "torch). Shapes' N is the OUTPUT's columns, so B has 2N (N a multiple of 8; TFLOP/s count the 2N-column "
        "product); fp16 or bf16 (--dtype), the rungs with KernelSpec.glu (default: those and auto); --activation "
        "and --epilogue apply after the pair",
    )
    _fp8_out(b, "beta 0, no --glu; cuBLAS's plain product in the inputs' dtype beside")
    c.add_argument(
        "--glu",
        default=None,
        choices=ACTIVATION_NAMES,
        help="check the kernel with glu=ACT: B = cumm.glu_weight(w1, w3) of 2N columns, C of N (--shapes' N is "
        "C's width, a multiple of 8; the standard set's N rounded up to one), against float64 "
        "ACT(x @ w1) * (x @ w3), then --activation / --reference over it; rungs with KernelSpec.glu, fp16 and bf16",
    )
    for sp in (b, t, c):
        sp.add_argument(
            "--kernel-file",
            action="append",
            default=[],
            metavar="FILE.py",
            help="import this Python file first (repeatable): the kernels it registers can be named",
        )
    for sp in (b, t, c, n):
        sp.set_defaults(subparser=sp)  # errors found after parsing are reported by the subcommand's parser
    return p
