# Per element, as tests/test_epilogue.py's test_fast_activations_per_element: cuBLASLt's fused bias + GELU
# (torch._addmm_activation, tanh GELU) and cumm's gelu_tanh against float64, in units of C's last place.
import torch, cumm, math
for dt, ub in ((torch.bfloat16, -7), (torch.float16, -10)):
    M, N = 4099, 64
    a = torch.linspace(-12, 12, M, device="cuda").reshape(M, 1).to(dt)
    x = torch.cat([a, torch.zeros(M, 15, device="cuda", dtype=dt)], 1)  # K = 16
    w = torch.zeros(16, N, device="cuda", dtype=dt); w[0] = 1
    b = torch.zeros(N, device="cuda", dtype=dt)
    v = a.double().expand(M, N)
    ref = 0.5 * v * (1 + torch.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v**3)))
    ulp = 2.0**ub * torch.clamp(ref.abs(), min=2.0**-14)
    for name, y in (("cuBLASLt", torch._addmm_activation(b, x, w, use_gelu=True)),
                    ("cumm", cumm.matmul(x, w, bias=b, activation="gelu_tanh"))):
        err = ((y.double() - ref).abs() - 2.0**-20) / ulp
        i = int(err.max(1).values.argmax())
        print(f"{dt} {name:9s} worst {float(err.max()):8.2f} ulp at v = {float(v[i, 0]):7.3f} (got {float(y[i, 0]):.6g}, want {float(ref[i, 0]):.6g}); elements over 1.5 ulp: {int((err > 1.5).sum())} of {err.numel()}")
