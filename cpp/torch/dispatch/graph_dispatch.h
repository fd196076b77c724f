// GraphDispatch: what serving one tuned graph needs once the graph is chosen, in one record for
// both front ends: the Python dispatcher (cpp/python/dispatcher.cc, which keys the call and
// selects the graph) and the C++ runtime (ModuleHandle, which selects by input names). It holds
// the input rules, the native runner and the order of that runner's inputs, and the output
// names, and it words every input error once (docs/reference/dispatch.md#input-check).
//
// Immutable after construction: concurrent calls need no lock here. The only mutable state is a
// rule's `outside_reported` flag (an atomic). `run` is as thread-safe as the runner; the runners
// bound here (AotiRunner, CudaGraphRunner) serialise calls with their own mutex, so a caller
// holding the Python GIL must release it before `run` (docs/reference/dispatch.md#threads-and-streams).
// Never throws itself; `run` lets a runner's exception through (each front end maps it).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "dispatch/input_rule.h"
#include "runners/runner.h"

namespace aitune::dispatch {

class GraphDispatch {
 public:
  // `graph`, `module` and `backend` name the graph in messages ("backend" as the user reads it:
  // "TorchInductorAotBackend()"). `input_order[i]` is the rule (tensor input) feeding the runner's
  // input i. `runner` is null when a Python callable serves the graph (the Python dispatcher
  // calls it itself). `output_names` name the runner's outputs (C++ runtime; may be empty).
  GraphDispatch(std::string graph, std::string module, std::string backend, std::vector<InputRule> rules,
                std::shared_ptr<Runner> runner = nullptr, std::vector<int64_t> input_order = {},
                std::vector<std::string> output_names = {});

  const std::string& graph() const { return graph_; }
  const std::string& module() const { return module_; }
  const std::string& backend() const { return backend_; }
  const std::vector<InputRule>& rules() const { return rules_; }
  const std::vector<int64_t>& input_order() const { return input_order_; }
  const std::shared_ptr<Runner>& runner() const { return runner_; }

  // kCorrupt when input_order names a tensor input the graph does not have (a crafted checkpoint).
  Status check_input_order() const;
  bool input_order_fits() const {
    for (int64_t index : input_order_) {
      if (index < 0 || static_cast<size_t>(index) >= rules_.size()) return false;
    }
    return true;
  }

  // Checks one tensor against its rule: dtype first, then the shape range. kProfileShape on a
  // dtype mismatch or a call outside a kProfile range (a rank other than the profile's included).
  // Sets `report_outside` when the call leaves a kEnvelope range for the first time: the caller
  // reports it (once per input; after that the envelope is no longer checked).
  Status check_input(const InputRule& rule, const at::Tensor& tensor, bool& report_outside) const;

  // True when `tensor` passes `rule` with nothing to say: what check_input decides, without
  // building a Status. Inline because it runs for every input of every call (the per-call budget,
  // docs/reference/dispatch.md#per-call-pipeline); check_input only runs when this says no.
  static bool passes(const InputRule& rule, const at::Tensor& tensor) {
    const c10::ScalarType actual = tensor.scalar_type();
    bool dtype_ok = false;
    for (c10::ScalarType accepted : rule.dtypes) dtype_ok = dtype_ok || accepted == actual;
    if (!dtype_ok) return false;
    if (rule.range == ShapeRange::kNone) return true;
    if (rule.range == ShapeRange::kEnvelope && rule.outside_reported->load(std::memory_order_relaxed))
      return true;
    const c10::IntArrayRef sizes = tensor.sizes();
    if (rule.range == ShapeRange::kProfile && sizes.size() != rule.min_shape.size()) return false;
    for (size_t axis = 0; axis < sizes.size() && axis < rule.min_shape.size(); ++axis) {
      if (sizes[axis] > rule.max_shape[axis] || sizes[axis] < rule.min_shape[axis]) return false;
    }
    return true;
  }

  // check_input over every rule in order; `tensor_at(i)` gives rule i's tensor and
  // `on_outside(rule, tensor)` reports a first exit from an envelope. Stops at the first error.
  template <class TensorAt, class OnOutside>
  Status check_inputs(TensorAt&& tensor_at, OnOutside&& on_outside) const {
    for (size_t i = 0; i < rules_.size(); ++i) {
      const InputRule& rule = rules_[i];
      const at::Tensor& tensor = tensor_at(i);
      if (passes(rule, tensor)) continue;
      bool report_outside = false;
      Status status = check_input(rule, tensor, report_outside);
      if (!status.ok()) return status;
      if (report_outside) on_outside(rule, tensor);
    }
    return Status::Ok();
  }

  // The runner's inputs: rule input_order[k]'s tensor for each k. Call check_input_order first.
  template <class TensorAt>
  std::vector<at::Tensor> runner_inputs(TensorAt&& tensor_at) const {
    std::vector<at::Tensor> inputs;
    inputs.reserve(input_order_.size());
    for (int64_t index : input_order_) inputs.push_back(tensor_at(static_cast<size_t>(index)));
    return inputs;
  }

  // Runs the native runner on `inputs` (from runner_inputs). kBackendUnavailable without one.
  StatusOr<std::vector<at::Tensor>> run(const std::vector<at::Tensor>& inputs) const;

  // The name of output i: its recorded access path, or "output[i]" when none was saved.
  std::string output_name(size_t i) const;

 private:
  // " in module 'm', graph 'g', backend B": where an input error happened.
  std::string where() const;

  const std::string graph_;
  const std::string module_;
  const std::string backend_;
  const std::vector<InputRule> rules_;
  const std::shared_ptr<Runner> runner_;
  const std::vector<int64_t> input_order_;
  const std::vector<std::string> output_names_;
};

}  // namespace aitune::dispatch
