from cumm.ladder import REGISTRY
from cumm.runtime import render as R
from cumm.runtime.compile import compile_offline
spec = REGISTRY["wgmma_ws"]
for over in [dict(BM=128, BN=64, STAGES=8, WGS=1, GM=4, EPI=1, SK=0, NUM_THREADS=256, CL=2, CA=1),
             dict(CL=2, CA=1), dict(BM=64, BN=128, STAGES=8, WGS=1, GM=4, EPI=1, SK=0, NUM_THREADS=256, CL=2, CA=1)]:
    cfg = spec.resolve(over, 90)
    k = compile_offline(spec, cfg, "sm_90", (1, 1, 1, 0, R.dtype_flag("bfloat16", "bfloat16")))
    print(over, k.registers, k.spill_bytes)
