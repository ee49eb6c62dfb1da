import statistics, sys
import torch
import cumm
from cumm.api import fused, matmul as mm
from cumm.runtime.timing import torch_rounds_ms

e4 = torch.float8_e4m3fn
for shape in ["8192x14336x4096", "8192x14336x1024", "4096x4096x4096"]:
    M, N, K = map(int, shape.split("x"))
    x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(K, N, device="cuda", dtype=torch.bfloat16) / K**0.5
    b = torch.randn(N, device="cuda", dtype=torch.bfloat16)
    s = torch.full((), 0.5, device="cuda")
    c8 = torch.empty(M, N, device="cuda", dtype=e4)
    fused.calls.clear(); mm._calls.clear()
    v = {
        "auto plain": lambda: cumm.matmul(x, w),
        "auto fp8": lambda: cumm.matmul(x, w, out=c8, scale_result=s),
        "auto bias+gelu_tanh": lambda: cumm.matmul(x, w, bias=b, activation="gelu_tanh"),
        "auto bias+gelu_tanh fp8": lambda: cumm.matmul(x, w, bias=b, activation="gelu_tanh", out=c8, scale_result=s),
        "ws plain": lambda: cumm.matmul(x, w, kernel="wgmma_ws"),
        "ws fp8": lambda: cumm.matmul(x, w, kernel="wgmma_ws", out=c8, scale_result=s),
        "pp plain": lambda: cumm.matmul(x, w, kernel="wgmma_pingpong"),
        "pp fp8": lambda: cumm.matmul(x, w, kernel="wgmma_pingpong", out=c8, scale_result=s),
    }
    for f in v.values():
        f()
    torch.cuda.synchronize()
    print(shape)
    for k, call in mm._calls.items():
        print("  plain:", call.plan.spec.name, dict(call.plan.cfg), tuple(call.plan.flags[:5]))
    for k, (call, _, _) in fused.calls.items():
        print("  fused:", call.plan.spec.name, dict(call.plan.cfg), tuple(call.plan.flags[:5]), call.plan.flags.epilogue.label)
    t = torch_rounds_ms({n: lambda i, f=f: f() for n, f in v.items()}, 5, 10)
    med = {n: statistics.median(x) for n, x in t.items()}
    for n, ms in med.items():
        print(f"  {n:26s} {ms:.4f} ms")
    sys.stdout.flush()
