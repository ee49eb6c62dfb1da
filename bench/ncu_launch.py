"""Launch one kernel a few times, for Nsight Compute to profile the last launch (bench/ncu.sh drives it).

    PYTHONPATH=. python3 bench/ncu_launch.py TARGET [--n N] [--calls 5] [--print-regex]

TARGET is a GEMM rung with optional tile overrides, ``double_buffer`` or ``vectorized:BK=16`` (cumm.matmul on
N x N x N, N default 4096), or a chain kernel, ``fused3_wg`` (cumm.multi_dot(kernel=...), which picks the
configuration by its size rule; N x N x N x N, N default 512), optionally with one of its named configurations
and overrides, ``fused3_wg:kw64x32`` or ``fused3_wg:kw64x32,TMA=0`` (run through ``cumm.plan.chain_plans.fused``).
``--print-regex`` prints the ncu kernel filter that selects TARGET's kernel (``regex:^cumm_NAME_[A-Z]``) and exits.
``--dtype float16|bfloat16`` multiplies GEMM operands of that dtype (torch tensors when torch is importable);
TARGET ``cublas`` is then torch.matmul at that dtype (else cupy.matmul), filter ``regex:^(nvjet|sm90_|cutlass)``:

    ncu --clock-control none -k regex:^cumm_wgmma_ws_[A-Z] --launch-skip 4 --launch-count 1 --section SpeedOfLight \
        python3 bench/ncu_launch.py wgmma_ws --dtype bfloat16
"""

from __future__ import annotations

import argparse


def parse(target: str) -> tuple[str, str | None, dict[str, int]]:
    """``"fused3_wg:kw64x32,TMA=0"`` -> ``("fused3_wg", "kw64x32", {"TMA": 0})``."""
    kernel, _, rest = target.partition(":")
    name, over = None, {}
    for item in filter(None, rest.split(",")):
        if "=" in item:
            k, v = item.split("=", 1)
            over[k.strip()] = int(v)
        elif name is None:
            name = item.strip()
        else:
            raise SystemExit(f"{target!r}: at most one named configuration")
    return kernel, name, over


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("target")
    p.add_argument("--n", type=int, default=None, help="size (default 4096 for a GEMM rung, 512 for a chain)")
    p.add_argument("--calls", type=int, default=5, help="launches; profile the last with --launch-skip calls-1")
    p.add_argument("--print-regex", action="store_true", help="print the ncu kernel filter for TARGET and exit")
    p.add_argument("--dtype", default="float32", choices=("float32", "float16", "bfloat16"), help="GEMM operands")
    a = p.parse_args()
    kernel, name, over = parse(a.target)
    if a.print_regex:  # kernel names are cumm_<kernel>_<first parameter, upper case>...
        print("regex:^(nvjet|sm90_|cutlass)" if kernel == "cublas" else f"regex:^cumm_{kernel}_[A-Z]")
        return
    if a.dtype != "float32" or kernel == "cublas":
        _half_or_cublas(kernel, over, a.n or 4096, a.dtype, a.calls)
        return

    import cupy

    import cumm

    chain = kernel in cumm.kernels("chain")
    n = a.n or (512 if chain else 4096)
    rng = cupy.random.default_rng(0)
    x = [rng.standard_normal((n, n), dtype=cupy.float32) for _ in range(3 if chain else 2)]
    out = cupy.empty((n, n), cupy.float32)
    if not chain:
        if name is not None:
            raise SystemExit(f"{kernel} is a GEMM rung: give overrides K=V, not a configuration name")
        for _ in range(a.calls):
            cumm.matmul(x[0], x[1], kernel=kernel, config=over or None, out=out)
    elif name is None and not over:
        for _ in range(a.calls):
            cumm.multi_dot(x, kernel=kernel, out=out)
    else:
        from cumm.plan import chain_plans as plans

        spec = cumm.kernel_spec(kernel)
        if name is None:
            raise SystemExit(f"overrides need a named configuration of {kernel}: one of {list(spec.configs)}")
        config = {**spec.configs[name], **over}
        dev = cupy.cuda.runtime.getDevice()
        for _ in range(a.calls):
            plans.fused(*x, out, kernel, config, dev)
    cupy.cuda.Device().synchronize()


def _half_or_cublas(kernel: str, over: dict[str, int], n: int, dtype: str, calls: int) -> None:
    """``calls`` products of ``dtype`` operands, n x n x n, by rung ``kernel`` or by cuBLAS (``cublas``)."""
    import cupy

    import cumm

    try:
        import torch

        g = torch.Generator(device="cuda").manual_seed(0)
        tdt = getattr(torch, dtype)
        x = [torch.randn(n, n, device="cuda", generator=g).to(tdt) for _ in range(2)]
        out = torch.empty(n, n, device="cuda", dtype=tdt)
        torch.backends.cuda.matmul.allow_tf32 = False
        ref = torch.matmul
    except ImportError:
        from cumm.tools.bench import np_dtype

        cdt = np_dtype(dtype)
        rng = cupy.random.default_rng(0)
        x = [rng.standard_normal((n, n), dtype=cupy.float32).astype(cdt) for _ in range(2)]
        out = cupy.empty((n, n), cdt)
        ref = cupy.matmul
    for _ in range(calls):
        if kernel == "cublas":
            ref(x[0], x[1], out=out)
        else:
            cumm.matmul(x[0], x[1], kernel=kernel, config=over or None, out=out)
    cupy.cuda.Device().synchronize()


if __name__ == "__main__":
    main()
