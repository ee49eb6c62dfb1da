"""CPU emulation: FP32 products from FP16 pieces (hi, lo scaled by 2^11; rows of A / columns of B scaled by powers
of two) against 3xTF32, relative Frobenius error and worst elementwise error against float64."""
import numpy as np
rng = np.random.default_rng(0)

def tf32(x):  # round to nearest, 10 explicit mantissa bits
    b = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    b = ((b + 0x1000) & 0xFFFFE000).astype(np.uint32)
    return b.view(np.float32)

def mm32(a, b, chunk=32):  # products exact, sums in float32 per chunk of K then added (the tensor core's FP32 sums)
    acc = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for k in range(0, a.shape[1], chunk):
        acc += (a[:, k:k+chunk].astype(np.float64) @ b[k:k+chunk].astype(np.float64)).astype(np.float32)
    return acc

def x3tf32(a, b):
    ab, bb = tf32(a), tf32(b)
    asm, bsm = (a - ab).astype(np.float32), (b - bb).astype(np.float32)
    return mm32(ab, bsm) + mm32(asm, bb) + mm32(ab, bb)

def pieces16(a, b):
    ea = np.floor(np.log2(np.abs(a).max(axis=1, keepdims=True) + 1e-300))
    eb = np.floor(np.log2(np.abs(b).max(axis=0, keepdims=True) + 1e-300))
    sa, sb = 2.0 ** (14 - ea), 2.0 ** (14 - eb)  # rows / columns into [2^14, 2^15)
    A, B = (a * sa).astype(np.float32), (b * sb).astype(np.float32)
    ah = A.astype(np.float16); al = ((A - ah.astype(np.float32)) * 2048).astype(np.float16)
    bh = B.astype(np.float16); bl = ((B - bh.astype(np.float32)) * 2048).astype(np.float16)
    c = mm32(ah, bh) + (mm32(ah, bl) + mm32(al, bh)) / np.float32(2048)
    return (c / sa / sb).astype(np.float32)

for name, gen in (("normal", lambda s: rng.standard_normal(s)),
                  ("lognormal sigma 2", lambda s: rng.standard_normal(s) * np.exp(2 * rng.standard_normal(s))),
                  ("lognormal sigma 4", lambda s: rng.standard_normal(s) * np.exp(4 * rng.standard_normal(s)))):
    n = 256
    a, b = gen((n, 1024)).astype(np.float32), gen((1024, n)).astype(np.float32)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    for f in (x3tf32, pieces16):
        c = f(a, b).astype(np.float64)
        fro = np.linalg.norm(c - ref) / np.linalg.norm(ref)
        scale = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)  # |A||B|: the elementwise bound's scale
        el = np.max(np.abs(c - ref) / scale)
        print(f"{name:18s} {f.__name__:9s} rel Frobenius {fro:.2e}  worst |err| / (|A||B|) {el:.2e}")
    c32 = (a @ b).astype(np.float64)
    print(f"{name:18s} {'fp32 sgemm':9s} rel Frobenius {np.linalg.norm(c32 - ref) / np.linalg.norm(ref):.2e}")
