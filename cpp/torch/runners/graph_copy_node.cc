// Only with the CUDA toolkit headers (a CUDA build of torch); CudaGraphRunner uses it under the
// same condition.
#if !defined(AITUNE_NO_CUDA) && __has_include(<cuda_runtime_api.h>)
#include "runners/graph_copy_node.h"

#include <vector>

namespace aitune {

GraphCopyNode GraphCopyNode::find(cudaGraph_t graph, Direction direction, void* dst, const void* src,
                                  size_t bytes) {
  GraphCopyNode found;
  size_t count = 0;
  if (graph == nullptr || cudaGraphGetNodes(graph, nullptr, &count) != cudaSuccess) return found;
  std::vector<cudaGraphNode_t> nodes(count);
  if (count == 0 || cudaGraphGetNodes(graph, nodes.data(), &count) != cudaSuccess) return found;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type;
    if (cudaGraphNodeGetType(node, &type) != cudaSuccess || type != cudaGraphNodeTypeMemcpy) continue;
    cudaMemcpy3DParms params = {};
    if (cudaGraphMemcpyNodeGetParams(node, &params) != cudaSuccess) continue;
    if (params.dstPtr.ptr != dst || params.srcPtr.ptr != src || params.srcArray || params.dstArray) continue;
    found.node_ = node;
    found.direction_ = direction;
    found.fixed_ = direction == Direction::kIntoGraph ? dst : const_cast<void*>(src);
    found.moving_ = direction == Direction::kIntoGraph ? const_cast<void*>(src) : dst;
    found.bytes_ = bytes;
    break;
  }
  (void)cudaGetLastError();  // a failed query leaves nothing the caller should see
  return found;
}

cudaError_t GraphCopyNode::retarget(cudaGraphExec_t exec, void* ptr) {
  if (ptr == moving_) return cudaSuccess;
  void* dst = direction_ == Direction::kIntoGraph ? fixed_ : ptr;
  const void* src = direction_ == Direction::kIntoGraph ? ptr : fixed_;
  const cudaError_t status =
      cudaGraphExecMemcpyNodeSetParams1D(exec, node_, dst, src, bytes_, cudaMemcpyDeviceToDevice);
  if (status == cudaSuccess) moving_ = ptr;
  return status;
}

}  // namespace aitune

#endif
