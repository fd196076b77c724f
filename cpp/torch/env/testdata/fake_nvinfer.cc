// A stand-in for TensorRT 11.4's libnvinfer.so.11 with the one entry point the environment probe
// reads, so the test sees how `aitune doctor` reports a TensorRT 11 install.
extern "C" int getInferLibVersion() { return 110400; }
