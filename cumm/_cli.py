"""Command line: ``cumm bench`` (kernels vs cuBLAS) and ``cumm tune`` (search tile configurations).

Parsing needs no GPU, so ``--help`` and argument errors work anywhere; the GPU is touched only when a
subcommand runs.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Sequence

from . import _bench
from ._ladder import gemm_kernels


def _kernel_list(text: str) -> list[str]:
    valid = [*gemm_kernels(), "auto"]
    names = [k.strip() for k in text.split(",") if k.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"no kernel given; choose from {', '.join(valid)}")
    for k in names:
        if k not in valid:
            raise argparse.ArgumentTypeError(f"unknown kernel {k!r}; choose from {', '.join(valid)}")
    return list(dict.fromkeys(names))


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
    try:
        return _bench.parse_shape(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _shape_list(text: str) -> list[tuple[int, int, int]]:
    return [_shape(s) for s in text.split(",") if s.strip()] or [_shape(text)]


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
    p = argparse.ArgumentParser(prog=prog, description="cumm: SGEMM kernels compiled at run time by NVRTC.")
    sub = p.add_subparsers(dest="command", required=True, metavar="{bench,tune}")

    b = sub.add_parser(
        "bench", help="time kernels against cuBLAS (FP32) and print a table",
        description="Time kernels against cuBLAS (cupy.matmul, FP32): CUDA events, median of runs after warm-up, "
                    "operands rotated past the L2 cache, each result checked against float64 first (wrong -> FAIL). "
                    "Prints the table to stdout; exits 1 if a kernel FAILs.",
    )
    b.add_argument("--kernels", type=_kernel_list, default=None, metavar="K1,K2",
                   help=f"kernels to time (default: all). Choices: {kernels}, auto")
    b.add_argument("--sizes", type=_size_list, default=None, metavar="S1,S2",
                   help="square sizes M = N = K (default 1024,2048,4096 when neither --sizes nor --shapes is given)")
    b.add_argument("--shapes", type=_shape_list, default=None, metavar="MxNxK,...",
                   help="additional arbitrary shapes, e.g. 4096x1024x512")
    b.add_argument("--repeat", type=_positive, default=_bench.DEFAULT_REPEAT, metavar="N",
                   help=f"timed runs per kernel and shape (default {_bench.DEFAULT_REPEAT}; slow kernels stop after "
                        f"about {_bench.BUDGET_S:g} s but run at least {_bench.MIN_RUNS} times)")
    b.add_argument("--json", metavar="PATH", help="write results and device information as JSON")
    b.add_argument("--markdown", metavar="PATH", help="write the table as markdown")
    b.add_argument("--plot", metavar="PATH", help="plot TFLOP/s against size (needs matplotlib: cumm[plot])")
    b.add_argument("--overhead", action="store_true",
                   help="also measure host overhead per call: cumm.matmul vs cupy.matmul on 64x64x64")

    t = sub.add_parser(
        "tune", help="search tile configurations for a kernel and shape",
        description="Search tile configurations: either --kernel with --shape, or --standard for the standard set.",
    )
    t.add_argument("--kernel", choices=gemm_kernels(), metavar="KERNEL", help=f"kernel to tune; one of {kernels}")
    t.add_argument("--shape", type=_shape, action="append", default=[], metavar="MxNxK",
                   help="shape to tune for (repeatable)")
    t.add_argument("--standard", action="store_true", help="tune the standard kernels and shapes")
    t.add_argument("--max-configs", type=_positive, default=None, metavar="N",
                   help="try at most N configurations per kernel and shape")
    t.add_argument("--budget", type=float, default=None, metavar="S",
                   help="seconds per shape (default 150; also CUMM_TUNE_BUDGET_S)")
    t.add_argument("--out", metavar="PATH",
                   help="also merge the winners into this table, e.g. cumm/tuned/h200.json (also CUMM_TUNE_OUT)")
    t.add_argument("--plan", action="store_true",
                   help="no GPU: print the configurations an H200 would time (compiled offline unless --no-compile)")
    t.add_argument("--no-compile", action="store_true", help="with --plan: skip the offline compiles")
    for sp in (b, t):
        sp.set_defaults(subparser=sp)  # errors found after parsing are reported by the subcommand's parser
    return p


def main(argv: Sequence[str] | None = None, *, prog: str = "cumm") -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    if args.command == "tune":
        if not args.standard and (args.kernel is None or not args.shape):
            args.subparser.error("give --kernel and --shape, or --standard")
        if args.budget is not None and not args.budget > 0:
            args.subparser.error(f"--budget must be a positive number of seconds, got {args.budget}")
        if args.out:
            os.environ["CUMM_TUNE_OUT"] = os.path.abspath(args.out)
        if args.budget is not None:
            os.environ["CUMM_TUNE_BUDGET_S"] = str(args.budget)
        from . import _tune  # lazily: the tuner's imports are needed only here

        if args.plan:
            return _tune.print_plan(args.kernel, list(args.shape), args.standard, args.max_configs,
                                    compile=not args.no_compile)
        return int(_tune.tune_shapes(kernel=args.kernel, shapes=list(args.shape), standard=args.standard,
                                     max_configs=args.max_configs))
    return _run_bench(args, command=f"{prog} {shlex.join(argv)}")


def _run_bench(args: argparse.Namespace, command: str) -> int:
    def fail(msg: str) -> int:
        print(f"cumm bench: {msg}", file=sys.stderr)
        return 1

    try:
        _bench.check_tf32()
    except _bench.BenchError as e:
        return fail(str(e))
    if args.plot:
        try:
            _bench.require_matplotlib()
        except ImportError as e:  # before spending minutes on the GPU
            return fail(str(e))
    reason = _bench.gpu_unavailable()
    if reason:
        return fail(f"{reason}; the benchmark needs an NVIDIA GPU")

    shapes = [] if args.sizes is None else _bench.square(args.sizes)
    shapes += args.shapes or []
    if not shapes:
        shapes = _bench.square(_bench.DEFAULT_SIZES)
    try:
        results = _bench.run(args.kernels, list(dict.fromkeys(shapes)), repeat=args.repeat)
        overhead = _bench.host_overhead() if args.overhead else None
        doc = _bench.build_report(results, device=_bench.device_info(), overhead=overhead, command=command)
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
        _bench.plot(results, args.plot, title=f"cumm SGEMM vs cuBLAS (FP32), {doc['device']}")
    failed = sum(r["status"] != "ok" for r in results)
    if failed:
        return fail(f"{failed} kernel run(s) FAILed verification or could not run (see the table)")
    return 0
