"""Helpers shared by several backends (docs/design.md#adding-a-backend): autocast, export shapes, ONNX export,
JIT warm-up, CUDA-graph serving, Torch-TensorRT settings, AITune's backend contract and the compiler
caches. A backend folder imports from here and from `backend.backend`, never from a sibling backend."""
