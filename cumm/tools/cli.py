"""Command line: ``cumm bench`` (kernels vs cuBLAS), ``cumm tune`` (search tile configurations), ``cumm check``
(a kernel on odd shapes against float64, with guard bands) and ``cumm new`` (a rung's template and spec as files
of your own).

Parsing needs no GPU and no CuPy, so ``--help``, ``--version`` and argument errors work anywhere (this module
imports nothing that needs CuPy); the GPU is touched only when a subcommand runs, and bench, tune and check say
what to install when CuPy is missing. ``--kernel-file FILE.py`` (bench, tune, check) imports a Python file that
registers kernels (``cumm.register``) before the arguments are checked, so its kernels are valid names.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shlex
import subprocess
import sys
import traceback
from collections.abc import Sequence

from ..core.install import cupy_missing
from ..ladder import gemm_kernels
from ..runtime import timing as _timing

GPU_COMMANDS = ("bench", "tune", "check")  # they need CuPy (tune --plan too: it compiles with NVRTC through CuPy)
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


def _dtype(text: str) -> str:
    if text not in _DTYPES:
        raise argparse.ArgumentTypeError(f"unknown dtype {text!r}; choose fp32, fp16 or bf16")
    return _DTYPES[text]


def _bench_dtype(text: str) -> str:
    """bench's dtypes: the matmul ones and fp8 (cumm.scaled_matmul's rungs beside torch._scaled_mm)."""
    if text in ("fp8", "float8", "float8_e4m3fn"):
        return "fp8"
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


def _shape(text: str) -> tuple[int, int, int]:
    from .bench import parse_shape

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
    from .bench import check_beta

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
        type=_bench_dtype,
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
        "--dtype",
        type=_dtype,
        default="float32",
        help="fp32 (default), fp16 or bf16: the rungs for that dtype are raced, entries saved for it",
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
            choices=("relu", "gelu", "gelu_tanh", "silu"),
            help="run the cumm kernels with this fused activation (before --epilogue)",
        )
        sp.add_argument(
            "--reference",
            default=None,
            metavar="EXPR",
            help="the epilogue's float64 meaning: a Python expression over v, row, col with cp, exp, tanh, erf, "
            "sqrt, maximum, e.g. 'v / (1 + exp(-v))'",
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


def load_kernel_files(paths: Sequence[str]) -> list[str]:
    """Import each Python file (it registers kernels); returns the kernels registered or replaced by them.
    Raises SystemExit(2) with the file's traceback when one cannot be imported."""
    from ..ladder.registry import REGISTRY

    before = dict(REGISTRY)
    for path in paths:
        name = os.path.splitext(os.path.basename(path))[0] or "kernel_file"
        if not os.path.isfile(path):
            print(f"cumm: kernel file {path} does not exist", file=sys.stderr)
            raise SystemExit(2)
        try:
            spec = importlib.util.spec_from_file_location(name, os.path.abspath(path))
            module = importlib.util.module_from_spec(spec)
            sys.modules.setdefault(name, module)
            spec.loader.exec_module(module)
        except Exception:
            print(f"cumm: could not load kernel file {path}:", file=sys.stderr)
            traceback.print_exc()
            raise SystemExit(2) from None
    return [n for n, s in REGISTRY.items() if before.get(n) is not s]


def _kernel_files(argv: Sequence[str]) -> list[str]:
    """The --kernel-file arguments of ``argv``, found before the full parse."""
    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)  # --kernel is not --kernel-file
    pre.add_argument("--kernel-file", action="append", default=[])
    return pre.parse_known_args(list(argv))[0].kernel_file


def main(argv: Sequence[str] | None = None, *, prog: str = "cumm") -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in argv if not a.startswith("-")), None)  # the top level has only --help, --version
    if command in GPU_COMMANDS and not {"-h", "--help"} & set(argv):
        missing = cupy_missing()
        if missing:
            print(f"{prog} {command}: {missing}", file=sys.stderr)
            return 1
    files = [] if argv[:1] == ["new"] else _kernel_files(argv)
    registered = load_kernel_files(files) if files else []
    parser = build_parser(prog)  # after the kernel files: their kernels are valid choices
    args = parser.parse_args(argv)
    if args.command == "new":
        return _run_new(args, prog)
    if args.command == "check":
        return _run_check(args, argv, registered, prog)
    if args.command == "tune":
        if not args.standard and not args.shape:
            args.subparser.error(
                "give --shape (with --kernel, or without it to race the dtype's top rungs), or --standard"
            )
        if args.budget is not None and not args.budget > 0:
            args.subparser.error(f"--budget must be a positive number of seconds, got {args.budget}")
        if args.out:
            os.environ["CUMM_TUNE_OUT"] = os.path.abspath(args.out)
        if args.budget is not None:
            os.environ["CUMM_TUNE_BUDGET_S"] = str(args.budget)
        from . import tune as _tune  # lazily: the tuner's imports are needed only here

        if args.plan:
            return _tune.print_plan(
                args.kernel,
                list(args.shape),
                args.standard,
                args.max_configs,
                compile=not args.no_compile,
                dtype=args.dtype,
            )
        return int(
            _tune.tune_shapes(
                kernel=args.kernel,
                shapes=list(args.shape),
                standard=args.standard,
                max_configs=args.max_configs,
                dtype=args.dtype,
            )
        )
    return _run_bench(args, command=f"{prog} {shlex.join(argv)}")


def _run_bench(args: argparse.Namespace, command: str) -> int:
    from . import bench as _bench

    def fail(msg: str) -> int:
        print(f"cumm bench: {msg}", file=sys.stderr)
        return 1

    if args.suite is not None:
        _suite_conflicts(args)
    try:
        _bench.check_tf32()
    except _bench.BenchError as e:
        return fail(str(e))
    from . import epiref as _epiref

    try:  # an epilogue that cannot be verified: said before the GPU is touched
        _epiref.check_args(args.epilogue, args.activation, args.reference)
    except (ValueError, TypeError, SyntaxError) as e:
        return fail(str(e))
    if args.plot:
        try:
            _bench.require_matplotlib()
        except ImportError as e:  # before spending minutes on the GPU
            return fail(str(e))
    reason = _bench.gpu_unavailable()
    if reason:
        return fail(f"{reason}; the benchmark needs an NVIDIA GPU")
    if args.suite is not None:
        return _run_suite(args, command, fail)
    if args.grouped:
        from . import bench_grouped as _grouped

        rows = _grouped.run()
        table = _grouped.format_rows(rows)
        print(table)
        if args.json:
            _bench.write_json(args.json, {"command": command, "device": _bench.device_info(), "grouped": rows})
        if args.markdown:
            with open(args.markdown, "w") as f:
                f.write(table + "\n")
        return 0

    if args.dtype == "fp8":
        from . import bench_fp8 as _fp8

        shapes = ([] if args.sizes is None else _bench.square(args.sizes)) + (args.shapes or [])
        rows = _fp8.run(shapes or _fp8.SHAPES)  # 5 interleaved rounds of 10 launches
        print(_fp8.format_rows(rows))
        if args.json:
            _bench.write_json(args.json, {"command": command, "device": _bench.device_info(), "fp8": rows})
        if args.markdown:
            with open(args.markdown, "w") as f:
                info = _bench.device_info()
                f.write(
                    f"# cumm FP8 GEMM benchmark\n\n`{command}`\n\n{info['device']} (cc {info['cc']}, CUDA "
                    f"{info['cuda']}); TFLOP/s, e4m3, bf16 out; columns: "
                    f"{', '.join(_fp8.COLUMNS)}\n\n{_fp8.format_rows(rows, markdown=True)}\n"
                )
        return 0
    shapes = [] if args.sizes is None else _bench.square(args.sizes)
    shapes += args.shapes or []
    if not shapes:
        shapes = _bench.square(_bench.DEFAULT_SIZES)
    try:
        results = _bench.run(
            args.kernels,
            list(dict.fromkeys(shapes)),
            repeat=args.repeat,
            dtype=args.dtype,
            settle_s=args.settle,
            beta=args.beta,
            **_epilogue_args(args),
        )
        overhead = _bench.host_overhead() if args.overhead else None
        doc = _bench.build_report(
            results,
            device=_bench.device_info(),
            overhead=overhead,
            command=command,
            dtype=args.dtype,
            settle_s=args.settle,
            beta=args.beta,
        )
    except _bench.BenchError as e:
        return fail(str(e))

    print(_bench.format_table(results))
    if overhead:
        print()
        print(_bench.format_overhead(overhead))
    if args.json:
        _bench.write_json(args.json, doc)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(_bench.format_markdown(doc))
    if args.plot:
        _bench.plot(
            results,
            args.plot,
            title=f"cumm vs cuBLAS ({args.dtype}"
            + (f", {_bench.product_label(args.beta)}" if args.beta else "")
            + f"), {doc['device']}",
            baseline=_bench.baseline_label(args.dtype, args.beta),
        )
    failed = sum(r["status"] != "ok" for r in results)
    if failed:
        return fail(f"{failed} kernel run(s) FAILed verification or could not run (see the table)")
    return 0


def _suite_conflicts(args: argparse.Namespace) -> None:
    """--suite brings its own shapes and times the plain product: the options it cannot honour are errors (exit 2)."""
    given = [
        flag
        for flag, on in (
            ("--sizes", args.sizes is not None),
            ("--shapes", args.shapes is not None),
            ("--grouped", args.grouped),
            ("--beta", args.beta != 0.0),
            ("--epilogue", args.epilogue is not None),
            ("--activation", args.activation is not None),
            ("--reference", args.reference is not None),
            ("--plot", args.plot is not None),
            ("--overhead", args.overhead),
        )
        if on
    ]
    if given:
        args.subparser.error(
            f"--suite times its own shapes (the plain product C = A @ B, a table rather than a plot); drop "
            f"{', '.join(given)}, or run without --suite"
        )


def _run_suite(args: argparse.Namespace, command: str, fail) -> int:
    import time

    from . import bench as _bench
    from . import suite as _suite_mod

    t0 = time.perf_counter()
    try:
        results = _suite_mod.run(args.suite, args.kernels, dtype=args.dtype, repeat=args.repeat, settle_s=args.settle)
        doc = _suite_mod.build_report(
            results,
            args.suite,
            device=_bench.device_info(),
            dtype=args.dtype,
            settle_s=args.settle,
            repeat=args.repeat,
            seconds=time.perf_counter() - t0,
            command=command,
        )
    except (ValueError, RuntimeError) as e:  # BenchError is a RuntimeError
        return fail(str(e))
    print(_suite_mod.format_table(results, args.dtype))
    if args.json:
        _bench.write_json(args.json, doc)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(_suite_mod.format_markdown(doc))
    failed = sum(r["status"] != "ok" for r in results)
    if failed:
        return fail(f"{failed} run(s) FAILed verification or could not run (see the table)")
    return 0


def _epilogue_args(args: argparse.Namespace) -> dict:
    """--epilogue, --activation, --reference as cumm.bench / cumm.check keywords (only those given)."""
    names = ("epilogue", "activation", "reference")
    return {n: getattr(args, n) for n in names if getattr(args, n, None) is not None}


def _run_new(args: argparse.Namespace, prog: str) -> int:
    from .new import new

    try:
        cu, py = new(args.name, args.rung, args.dir, force=args.force)
    except (ValueError, FileExistsError) as e:
        print(f"cumm new: {e}", file=sys.stderr)
        return 2
    print(f"wrote {cu} (the {args.rung} template) and {py} (its spec, registered on import). Next:")
    print(f"  {prog} check --kernel-file {py}")
    print(f"  {prog} bench --kernel-file {py} --kernels {args.rung},{args.name}")
    return 0


def _run_check(args: argparse.Namespace, argv: Sequence[str], registered: Sequence[str], prog: str) -> int:
    from . import check as _check

    kernels = args.kernel or [n for n in registered if n != "auto"]
    if not kernels:
        args.subparser.error("give --kernel, or a --kernel-file that registers a kernel")
    if "auto" in kernels:
        args.subparser.error("check runs a named kernel, not auto")
    from . import epiref as _epiref

    try:  # an epilogue that cannot be verified: said before the GPU is touched
        _epiref.check_args(args.epilogue, args.activation, args.reference)
    except (ValueError, TypeError, SyntaxError) as e:
        print(f"cumm check: {e}", file=sys.stderr)
        return 1
    if args.sanitize and not os.environ.get(_check.UNDER_SANITIZER):
        rest = [a for a in argv if a != "--sanitize"]
        cmd = _check.sanitizer_command(rest)
        if cmd is None:
            print(
                "cumm check: compute-sanitizer is not installed (not on PATH; it comes with the CUDA toolkit); "
                "run without --sanitize, or install it",
                file=sys.stderr,
            )
            return 2
        print(f"cumm check: running under {' '.join(cmd[:3])}", file=sys.stderr, flush=True)
        return subprocess.run(cmd, env=dict(os.environ, **{_check.UNDER_SANITIZER: "1"})).returncode
    if os.environ.get(_check.UNDER_SANITIZER):
        import cupy

        cupy.cuda.set_allocator(None)  # one cudaMalloc per array: memcheck then sees writes past each one
    failed = 0
    for k in kernels:
        try:
            report = _check.check(
                k,
                args.config,
                shapes=args.shapes,
                **_epilogue_args(args),
            )
        except (ValueError, RuntimeError) as e:
            print(f"cumm check: {e}", file=sys.stderr)
            return 1
        print(report, flush=True)
        failed += not report.ok
    return 1 if failed else 0
