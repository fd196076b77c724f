"""Diagnoses AOTInductor package loading on a machine (the GPU image's loader crashed):
prints which libstdc++ copies are mapped, then loads and runs a tiny CUDA package.

    python tools/diagnostics/aoti_diag.py [plain|global-first|global-after] [package path]

(tools/diagnostics/aoti_diag.sh runs every mode, with LD_PRELOAD, LD_DEBUG and gdb.)

`global-first` loads libstdc++ into the global symbol scope before torch is imported,
`global-after` after torch but before the package loads (what aitune could do at import);
with LD_DEBUG=bindings the dynamic linker shows which object each symbol resolved to."""

import ctypes
import sys

mode = sys.argv[1] if len(sys.argv) > 1 else "plain"
package = sys.argv[2] if len(sys.argv) > 2 else "/tmp/diag.pt2"
if mode == "global-first":
    ctypes.CDLL("libstdc++.so.6", mode=ctypes.RTLD_GLOBAL)
import torch  # noqa: E402


class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l = torch.nn.Linear(8, 8)

    def forward(self, x):
        return self.l(x).relu()


m = M().cuda().eval()
x = torch.randn(2, 8, device="cuda")
import os  # noqa: E402

if not os.path.exists(package):
    ep = torch.export.export(m, (x,))
    package = torch._inductor.aoti_compile_and_package(ep, package_path=package)
if mode == "global-after":
    ctypes.CDLL("libstdc++.so.6", mode=ctypes.RTLD_GLOBAL)
maps = open("/proc/self/maps").read()
print(
    "mode",
    mode,
    "libstdc++ mapped:",
    sorted({line.split()[-1] for line in maps.splitlines() if "stdc++" in line}),
    flush=True,
)
runner = torch._inductor.aoti_load_package(package)
print("loaded", flush=True)
print("ok", runner(x).sum().item(), flush=True)
