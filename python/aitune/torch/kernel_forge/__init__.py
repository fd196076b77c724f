"""Kernel-level analysis of where a module's GPU time goes (AITune's `kernel_forge` path)."""

from aitune.torch.kernel_forge.module_function_kernel_profiler import ModuleFunctionKernelProfiler

__all__ = ["ModuleFunctionKernelProfiler"]
