"""Diagnoses AOTInductor package loading on a machine (the GPU image's loader crashed):
prints which libstdc++ copies are mapped, then loads and runs a tiny CUDA package."""
import torch

class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l = torch.nn.Linear(8, 8)

    def forward(self, x):
        return self.l(x).relu()


m = M().cuda().eval()
x = torch.randn(2, 8, device="cuda")
ep = torch.export.export(m, (x,))
path = torch._inductor.aoti_compile_and_package(ep, package_path="/tmp/diag.pt2")
maps = open("/proc/self/maps").read()
print("libstdc++ mapped:", sorted({l.split()[-1] for l in maps.splitlines() if "stdc++" in l}), flush=True)
runner = torch._inductor.aoti_load_package(path)
print("loaded", flush=True)
print("ok", runner(x).sum().item(), flush=True)
