#include "dispatch/graph_dispatch.h"

#include "bridge/tensor_bridge.h"
#include "spec/shape.h"

namespace aitune::dispatch {

std::string profile_text(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    text += (i ? ", " : "") + (shape[i] == kNoUpperBound ? std::string("None") : std::to_string(shape[i]));
  }
  return text + "]";
}

namespace {

std::string torch_dtype(c10::ScalarType type) { return "torch." + dtype_name(type); }

// "input 'x' (tensor 'input_x'": the start of every input error's subject.
std::string subject(const InputRule& rule) {
  return "input " + rule.path_repr + " (tensor '" + rule.tensor_name + "'";
}

}  // namespace

GraphDispatch::GraphDispatch(std::string graph, std::string module, std::string backend,
                             std::vector<InputRule> rules, std::shared_ptr<Runner> runner,
                             std::vector<int64_t> input_order, std::vector<std::string> output_names)
    : graph_(std::move(graph)),
      module_(std::move(module)),
      backend_(std::move(backend)),
      rules_(std::move(rules)),
      runner_(std::move(runner)),
      input_order_(std::move(input_order)),
      output_names_(std::move(output_names)) {}

std::string GraphDispatch::where() const {
  return " in module '" + module_ + "', graph '" + graph_ + "', backend " + backend_;
}

Status GraphDispatch::check_input_order() const {
  for (int64_t index : input_order_) {
    if (index < 0 || static_cast<size_t>(index) >= rules_.size())
      return Status(StatusCode::kCorrupt, "input_order of graph '" + graph_ + "' names tensor input " +
                                              std::to_string(index) + " of " + std::to_string(rules_.size()));
  }
  return Status::Ok();
}

Status GraphDispatch::check_input(const InputRule& rule, const at::Tensor& tensor,
                                  bool& report_outside) const {
  const c10::ScalarType actual = tensor.scalar_type();
  bool dtype_ok = false;
  for (c10::ScalarType accepted : rule.dtypes) dtype_ok = dtype_ok || accepted == actual;
  if (!dtype_ok) {
    std::string expected;
    for (size_t i = 0; i < rule.dtypes.size(); ++i)
      expected += (i ? " or " : "") + torch_dtype(rule.dtypes[i]);
    return profile_shape_error("Input dtype " + torch_dtype(actual) + " does not match tuned dtype " +
                               expected + " for " + subject(rule) + ")" + where());
  }
  if (rule.range == ShapeRange::kNone) return Status::Ok();
  // An envelope already reported is not checked again: the call goes on either way.
  if (rule.range == ShapeRange::kEnvelope && rule.outside_reported->load(std::memory_order_relaxed)) {
    return Status::Ok();
  }
  const c10::IntArrayRef sizes = tensor.sizes();
  const bool hard = rule.range == ShapeRange::kProfile;
  // The graph key already fixes the rank on the Python path; the C++ runtime's run_graph does not
  // select by rank, so a profile refuses another rank itself.
  if (hard && sizes.size() != rule.min_shape.size()) {
    return profile_shape_error(
        "Input shape " + format_shape(Shape(sizes.begin(), sizes.end())) + " has rank " +
        std::to_string(sizes.size()) + ", profile shape " + profile_text(rule.min_shape) + " has rank " +
        std::to_string(rule.min_shape.size()) + " for " + subject(rule) + "; profile min " +
        profile_text(rule.min_shape) + ", max " + profile_text(rule.max_shape) + ")" + where());
  }
  bool above = false;
  bool below = false;
  for (size_t axis = 0; axis < sizes.size() && axis < rule.min_shape.size(); ++axis) {
    above = above || sizes[axis] > rule.max_shape[axis];
    below = below || sizes[axis] < rule.min_shape[axis];
  }
  if (!above && !below) return Status::Ok();
  if (!hard) {
    report_outside = !rule.outside_reported->exchange(true);
    return Status::Ok();
  }
  const std::string shape = format_shape(Shape(sizes.begin(), sizes.end()));
  const std::string tail = " for " + subject(rule) + "; profile min " + profile_text(rule.min_shape) +
                           ", max " + profile_text(rule.max_shape) + ")" + where();
  return profile_shape_error(
      above ? "Input shape " + shape + " exceeds max profile shape " + profile_text(rule.max_shape) + tail
            : "Input shape " + shape + " is below min profile shape " + profile_text(rule.min_shape) + tail);
}

StatusOr<std::vector<at::Tensor>> GraphDispatch::run(const std::vector<at::Tensor>& inputs) const {
  if (!runner_) {
    return Status(StatusCode::kBackendUnavailable,
                  "graph '" + graph_ + "' of module '" + module_ + "' has no native runner");
  }
  return runner_->run(inputs);
}

std::string GraphDispatch::output_name(size_t i) const {
  return i < output_names_.size() ? output_names_[i] : "output[" + std::to_string(i) + "]";
}

}  // namespace aitune::dispatch
