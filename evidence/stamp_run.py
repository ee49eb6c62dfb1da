import sys, torch, cumm
n = int(sys.argv[1]) if len(sys.argv) > 1 else 512
a, b, c = (torch.randn(n, n, device="cuda") for _ in range(3))
for _ in range(3): cumm.multi_dot([a, b, c])
torch.cuda.synchronize()
print("CALLS START", flush=True)
for _ in range(20):
    cumm.multi_dot([a, b, c])
torch.cuda.synchronize()
print("CALLS END", flush=True)
