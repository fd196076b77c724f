"""Kernel-level analysis of where a module's GPU time goes: ModuleFunctionKernelProfiler, at
AITune's path (docs/guide.md, "Profiling a call"). It belongs to the api layer, not to backend/."""
