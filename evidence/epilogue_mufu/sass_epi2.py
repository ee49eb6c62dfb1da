import collections, re, sys
sys.path.insert(0, "bench"); sys.path.insert(0, "tests")
from cuobjdump import sass
from cumm.ladder import REGISTRY
from cumm.plan import epilogue as E
from cumm.runtime import render as R
from cumm.runtime.compile import compile_offline
from test_epilogue import _Fake, _build
spec = REGISTRY["wgmma_pingpong"]
cfg = spec.resolve(dict(BN=192, STAGES=4, GM=16), 90)
dt, act = sys.argv[1], sys.argv[2]
epi, _ = _build(M=8192, N=14336, bias=_Fake((14336,), dt), activation=act)
k = compile_offline(spec, cfg, "sm_90a", E.with_flags((1, 1, 1, 0, R.dtype_flag(dt, dt)), epi))
ops = collections.Counter()
for l in sass(k.cubin).splitlines():
    m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_]+)(\.[A-Z0-9_.]+)?", l)
    if m: ops[m.group(2)+(m.group(3) or '')] += 1
print(dt, act, k.registers, sum(ops.values()), ops.most_common(16))
open(f"lab/s72/{dt}_{act}.sass","w").write(sass(k.cubin))
