"""float16 C's one-MUFU sigmoid (named gelu_tanh / silu) against the two-MUFU form as a snippet, and the plain product;
bfloat16 named beside. Errors vs float64 and torch's own. PYTHONPATH=. python3 lab/s72/sig_ab.py [--warm]"""
import math, statistics, sys
import torch, torch.nn.functional as F
import cumm
from cumm.runtime.timing import torch_rounds_ms

warm = "--warm" in sys.argv
OLD = {"gelu": "{ const float x = fabsf(v) * 0.70710678118654752f; const float t = __fdividef(1.0f, fmaf(0.3275911f, x, 1.0f)); float q = fmaf(1.061405429f, t, -1.453152027f); q = fmaf(q, t, 1.421413741f); q = fmaf(q, t, -0.284496736f); q = fmaf(q, t, 0.254829592f); q = q * t * __expf(-x * x); const float hq = 0.5f * v * q; v = v >= 0.0f ? v - hq : hq; }",
       "gelu_tanh": "v = __fdividef(v, 1.0f + __expf(-1.5957691216057308f * fmaf(0.044715f * v, v * v, v)));",
       "silu": "v = __fdividef(v, 1.0f + __expf(-v));"}
REF = {"gelu": F.gelu, "gelu_tanh": lambda z: F.gelu(z, approximate="tanh"), "silu": F.silu}
for (M, N, K) in [(8192, 14336, 1024), (8192, 14336, 4096), (4096, 4096, 4096)]:
  for dt in (torch.bfloat16,):
    sets = [(torch.randn(M, K, device="cuda", dtype=dt), torch.randn(K, N, device="cuda", dtype=dt) / K**0.5 * 2) for _ in range(3)]
    bias = torch.randn(N, device="cuda", dtype=dt)
    v = {"plain": lambda i: cumm.matmul(*sets[i % 3])}
    z64 = sets[0][0].double() @ sets[0][1].double() + bias.double()
    for act in ("gelu",):
        ref = REF[act](z64)
        tout = REF[act](torch.addmm(bias, *sets[0]))
        terr = float((tout.double() - ref).norm() / ref.norm())
        forms = {f"{act}": dict(activation=act)}
        if True:
            forms[f"{act}_old"] = dict(epilogue=OLD[act])
        for name, kw in forms.items():
            out = torch.full((M, N), float("nan"), device="cuda", dtype=dt)
            cumm.matmul(*sets[0], bias=bias, out=out, **kw)
            e = float((out.double() - ref).norm() / ref.norm())
            mx = float(((out.double() - ref).abs() / (ref.abs() + 1e-3)).max())
            print(f"{dt} {M}x{N}x{K} {name}: err {e:.3e} (torch {terr:.3e}, x{e / terr:.2f}) max rel {mx:.2e}", flush=True)
            v[name] = (lambda i, kw=kw: cumm.matmul(*sets[i % 3], bias=bias, **kw))
    del z64, ref
    torch.cuda.synchronize()
    if warm:
        continue
    for f in v.values():
        f(0)
    for rep in range(2):
        t = torch_rounds_ms(v, 9, 10 if K > 2048 else 20, rotate=True)
        med = {k: statistics.median(s) * 1000 for k, s in t.items()}
        print(f"{dt} {M}x{N}x{K}: " + "  ".join(f"{k} {us:.1f}us ({us / med['plain']:.3f})" for k, us in med.items()), flush=True)
