"""Command line: ``cumm bench`` (kernels vs cuBLAS), ``cumm tune`` (search tile configurations), ``cumm check``
(a kernel on odd shapes against float64, with guard bands) and ``cumm new`` (a rung's template and spec as files
of your own).

This module dispatches: it loads the kernel files, parses (the parsers are :mod:`.cli_args`) and runs the
subcommand. Parsing needs no GPU and no CuPy, so ``--help``, ``--version`` and argument errors work anywhere (this
module and its parsers import nothing that needs CuPy); the GPU is touched only when a subcommand runs, and bench,
tune and check say what to install when CuPy is missing. ``--kernel-file FILE.py`` (bench, tune, check) imports a
Python file that registers kernels (``cumm.register``) before the arguments are checked, so its kernels are valid
names.
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

from ..core.dtypes import FP8_DTYPE
from ..core.install import cupy_missing
from .cli_args import build_parser

GPU_COMMANDS = ("bench", "tune", "check")  # they need CuPy (tune --plan too: it compiles with NVRTC through CuPy)


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
        transposed_b: set[tuple[int, int, int]] = set()
        if args.suite:  # the products a suite times, as the tuned table is looked up for them
            from .suite import SuiteError, load

            try:
                suite = load(args.suite)
            except SuiteError as e:
                args.subparser.error(str(e))
            args.shape, transposed_b = [*args.shape, *suite.tuned_shapes()], suite.transposed_b()
        if not args.standard and not args.shape:
            args.subparser.error(
                "give --shape (with --kernel, or without it to race the dtype's top rungs), --suite or --standard"
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
                rungs=args.rungs,
                transposed_b=transposed_b,
            )
        return int(
            _tune.tune_shapes(
                kernel=args.kernel,
                shapes=list(args.shape),
                standard=args.standard,
                max_configs=args.max_configs,
                dtype=args.dtype,
                rungs=args.rungs,
                transposed_b=transposed_b,
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
    elif args.runs != 1:
        args.subparser.error(f"--runs {args.runs} repeats a shape suite: add --suite llm (or a suite file)")
    try:
        _bench.check_tf32()
    except _bench.BenchError as e:
        return fail(str(e))
    from . import epiref as _epiref

    try:  # an epilogue that cannot be verified, a glu= race cumm cannot run: said before the GPU is touched
        _epiref.check_args(args.epilogue, args.activation, args.reference)
        if args.glu is not None:
            if args.grouped:
                raise ValueError("--glu races a gated MLP's product; --grouped times grouped products: drop one")
            if args.beta != 0.0:
                raise ValueError(f"--beta {args.beta:g} with --glu: the unfused baseline has no beta; drop --beta")
            shapes = ([] if args.sizes is None else _bench.square(args.sizes)) + (args.shapes or [])
            _epiref.check_glu(args.glu, [args.dtype], args.kernels, shapes)
        if args.out_dtype is not None or args.scale_result is not None:
            if args.grouped or args.dtype == FP8_DTYPE:
                what = "--grouped times grouped products" if args.grouped else "--dtype fp8 races FP8 inputs"
                raise ValueError(f"--out-dtype races an FP8 C of a bf16 or fp16 product; {what}: drop one")
            _bench.fp8_args(args.out_dtype, args.scale_result, args.dtype, args.beta, args.glu)
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

    if args.dtype == FP8_DTYPE:
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
    fp8_c = {k: getattr(args, k) for k in ("out_dtype", "scale_result") if getattr(args, k) is not None}
    try:
        results = _bench.run(
            args.kernels,
            list(dict.fromkeys(shapes)),
            repeat=args.repeat,
            dtype=args.dtype,
            settle_s=args.settle,
            beta=args.beta,
            **fp8_c,
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
            glu=args.glu,
            **fp8_c,
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
            ("--glu", args.glu is not None),
            ("--out-dtype", args.out_dtype is not None),
            ("--scale-result", args.scale_result is not None),
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
    from . import suite_report as _report

    t0 = time.perf_counter()
    try:
        runs = [
            _suite_mod.run(args.suite, args.kernels, dtype=args.dtype, repeat=args.repeat, settle_s=args.settle)
            for _ in range(args.runs)
        ]
        results = _report.combine(runs)
        doc = _report.build_report(
            results,
            args.suite,
            device=_bench.device_info(),
            dtype=args.dtype,
            settle_s=args.settle,
            repeat=args.repeat,
            seconds=time.perf_counter() - t0,
            command=command,
            runs=args.runs,
        )
    except (ValueError, RuntimeError) as e:  # BenchError is a RuntimeError
        return fail(str(e))
    print(_report.format_table(results, args.dtype, runs=args.runs))
    if args.json:
        _bench.write_json(args.json, doc)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(_report.format_markdown(doc))
    failed = sum(r["status"] != "ok" for r in results)
    if failed:
        return fail(f"{failed} run(s) FAILed verification or could not run (see the table)")
    return 0


def _epilogue_args(args: argparse.Namespace) -> dict:
    """--epilogue, --activation, --reference, --glu as cumm.bench / cumm.check keywords (only those given)."""
    names = ("epilogue", "activation", "reference", "glu")
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
    from ..ladder import get_spec
    from . import check_fp8 as _fp8
    from . import epiref as _epiref

    try:  # an epilogue, FP8 C or glu= check cumm cannot run: said before the GPU is touched (and the sanitizer)
        _epiref.check_args(args.epilogue, args.activation, args.reference)
        if args.out_dtype is not None or args.scale_result is not None:
            for k in kernels:
                dts = _fp8.default_dtypes(get_spec(k).dtypes, args.out_dtype)
                _fp8.check_args(args.out_dtype, dts, args.scale_result)
        if args.glu is not None:
            for k in kernels:
                _epiref.check_glu(args.glu, get_spec(k).dtypes, [k], args.shapes)
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
                out_dtype=args.out_dtype,
                scale_result=args.scale_result,
                **_epilogue_args(args),
            )
        except (ValueError, RuntimeError) as e:
            print(f"cumm check: {e}", file=sys.stderr)
            return 1
        print(report, flush=True)
        failed += not report.ok
    return 1 if failed else 0
