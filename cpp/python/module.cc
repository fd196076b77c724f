// aitune._C: the pybind11 bindings (docs/design.md#layers). Registration only: the logic lives in
// cpp/core, cpp/torch and the flattener/dispatcher beside this file.
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/headeronly/version.h>

#include <cmath>

#include "aoti_bindings.h"
#include "bridge/tensor_bridge.h"
#include "checkpoint_bindings.h"
#include "common/crash_report.h"
#include "dispatcher.h"
#include "env/environment.h"
#include "errors.h"
#include "flatten.h"
#include "measure_bindings.h"
#include "runtime_bindings.h"
#include "signature.h"
#include "spec/dynamic_dims.h"
#include "spec/graph_key.h"
#include "spec/tensor_spec.h"
#include "torch_runtime_bindings.h"
#include "trt_profile_bindings.h"

namespace py = pybind11;
using namespace aitune;
using namespace aitune::python;

namespace {

std::optional<int64_t> batch_size_arg(py::handle bs) {
  if (bs.is_none()) return std::nullopt;
  return bs.cast<int64_t>();
}

// Python shape form: ints for static axes, "batch0" / "dim2" strings for symbolic ones.
py::list symbolic_list(const TensorSpec& spec) {
  py::list out;
  for (int64_t axis = 0; axis < spec.rank(); ++axis) {
    if (spec.axis_kind(axis) == AxisKind::kStatic) {
      out.append(spec.min_shape()[static_cast<size_t>(axis)]);
    } else {
      out.append(spec.axis_label(axis));
    }
  }
  return out;
}

AxisDef axis_def_from_python(py::handle axis) {
  if (py::isinstance<py::int_>(axis)) return axis.cast<int64_t>();
  auto t = axis.cast<py::tuple>();  // (name, is_batch, min, max, opt)
  DimDef dim{t[0].cast<std::string>(), t[1].cast<bool>(), t[2].cast<int64_t>(), t[3].cast<int64_t>(),
             t[4].is_none() ? std::nullopt : std::optional<int64_t>(t[4].cast<int64_t>())};
  return dim;
}

std::vector<InputShapeDef> shape_defs_from_python(const py::list& defs) {
  std::vector<InputShapeDef> out;
  for (auto item : defs) {
    auto t = item.cast<py::tuple>();
    InputShapeDef def;
    def.path_repr = t[0].cast<std::string>();
    for (auto axis : t[1]) def.axes.push_back(axis_def_from_python(axis));
    out.push_back(std::move(def));
  }
  return out;
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "aitune native core";
  m.attr("torch_version") = TORCH_VERSION;
  m.def("install_crash_report", &aitune::install_crash_report,
        "Native frames on a fatal signal, then the previous handler (faulthandler); AITUNE_CRASH_REPORT=1.");

  py::class_<GraphKey>(m, "GraphKey")
      .def("__hash__", [](const GraphKey& k) { return static_cast<int64_t>(k.hash() >> 1); })
      .def("__eq__", [](const GraphKey& a, const GraphKey& b) { return a == b; })
      .def("__len__", &GraphKey::size)
      .def_property_readonly("hash", &GraphKey::hash)
      .def_property_readonly("tokens", [](const GraphKey& k) { return k.tokens(); })
      .def_static("from_tokens", &GraphKey::from_tokens, py::arg("tokens"))
      .def("__repr__", [](const GraphKey& k) {
        char buf[64];
        std::snprintf(buf, sizeof(buf), "GraphKey(%016llx, %zu tokens)",
                      static_cast<unsigned long long>(k.hash()), k.size());
        return std::string(buf);
      });

  py::class_<Signature>(m, "Signature")
      .def(py::init<const py::list&>(), py::arg("params"))
      .def("to_list", &Signature::to_list)
      .def("bind", [](const Signature& sig, const py::tuple& args, const py::dict& kwargs) {
        std::vector<BoundArg> bound;
        sig.bind(args, kwargs, bound);
        py::dict out;
        for (const auto& b : bound) out[sig.params()[b.param].name_obj] = b.value;
        return out;
      });

  register_flatten_bindings(m);

  py::class_<TensorSpec>(m, "TensorSpec")
      .def_static(
          "from_sample",
          [](std::vector<int64_t> shape, std::string dtype, py::object bs) {
            return TensorSpec::from_sample(std::move(shape), std::move(dtype), batch_size_arg(bs));
          },
          py::arg("shape"), py::arg("dtype"), py::arg("batch_size"))
      .def_static("from_parts",
                  [](std::vector<std::string> kinds, Shape min_shape, Shape max_shape,
                     std::vector<double> multipliers, std::string dtype) {
                    std::vector<AxisKind> k;
                    for (const auto& s : kinds) {
                      if (s == "static")
                        k.push_back(AxisKind::kStatic);
                      else if (s == "batch")
                        k.push_back(AxisKind::kBatch);
                      else if (s == "dim")
                        k.push_back(AxisKind::kDynamic);
                      else
                        throw py::value_error("axis kind must be static, batch or dim; got '" + s + "'");
                    }
                    return value_or_throw(TensorSpec::from_parts(std::move(k), std::move(min_shape),
                                                                 std::move(max_shape), std::move(multipliers),
                                                                 std::move(dtype)));
                  })
      .def("update", [](TensorSpec& s, const Shape& shape,
                        py::object bs) { ok_or_throw(s.update(shape, batch_size_arg(bs))); })
      .def("extend_max", [](TensorSpec& s, const Shape& shape) { ok_or_throw(s.extend_max(shape)); })
      .def("copy", [](const TensorSpec& s) { return TensorSpec(s); })
      .def_property_readonly("rank", &TensorSpec::rank)
      .def_property_readonly("min_shape", &TensorSpec::min_shape)
      .def_property_readonly("max_shape", &TensorSpec::max_shape)
      .def_property_readonly("dtype", &TensorSpec::dtype)
      .def_property_readonly("shape", &symbolic_list)
      .def_property_readonly(
          "axis_kinds",
          [](const TensorSpec& s) {
            std::vector<std::string> out;
            for (auto k : s.axis_kinds()) {
              out.push_back(k == AxisKind::kStatic ? "static" : k == AxisKind::kBatch ? "batch" : "dim");
            }
            return out;
          })
      .def_property_readonly("multipliers", &TensorSpec::multipliers)
      .def_property_readonly("batch_multipliers",
                             [](const TensorSpec& s) {
                               py::dict out;
                               for (auto [axis, mult] : s.batch_multipliers()) out[py::int_(axis)] = mult;
                               return out;
                             })
      .def("has_batch_axis", &TensorSpec::has_batch_axis)
      .def("has_dynamic_axis", &TensorSpec::has_dynamic_axis)
      .def("max_batch_size", &TensorSpec::max_batch_size)
      .def("min_batch_size", &TensorSpec::min_batch_size)
      .def("batched_shape", &TensorSpec::batched_shape)
      .def("matches", &TensorSpec::matches)
      .def("symbolic_shape", &TensorSpec::symbolic_shape)
      .def("__repr__", [](const TensorSpec& s) {
        return "TensorSpec(shape=" + s.symbolic_shape() + ", min=" + format_shape(s.min_shape()) +
               ", max=" + format_shape(s.max_shape()) + ", dtype=" + s.dtype() + ")";
      });

  m.def("validate_dim_def", [](const py::tuple& dim) {
    ok_or_throw(validate_dim_def(std::get<DimDef>(axis_def_from_python(dim))));
  });
  m.def("validate_shape_defs",
        [](const py::list& defs) { ok_or_throw(validate_shape_defs(shape_defs_from_python(defs))); });
  m.def("check_call_against_defs", [](const std::string& module, const py::list& defs,
                                      const std::vector<std::pair<std::string, Shape>>& inputs) {
    ok_or_throw(check_call_against_defs(module, shape_defs_from_python(defs), inputs));
  });
  m.def("check_defs_observed",
        [](const std::string& module, const py::list& defs, const std::vector<std::string>& paths) {
          ok_or_throw(check_defs_observed(module, shape_defs_from_python(defs), paths));
        });
  m.def("effective_shape", [](const py::tuple& def) {
    py::list one;
    one.append(def);
    EffectiveShape e = effective_shape(shape_defs_from_python(one)[0]);
    return py::make_tuple(e.min, e.opt, e.max);
  });

  // Base of every native runner bound to Python (AotiRunner, CudaGraphRunner), so the
  // dispatcher can hold any of them.
  py::class_<Runner, std::shared_ptr<Runner>>(m, "Runner").def("describe", &Runner::describe);
  register_measure_bindings(m);
  register_aoti_bindings(m);
  register_torch_runtime_bindings(m);
  register_checkpoint_bindings(m);
  register_trt_profile_bindings(m);
  register_runtime_bindings(m);

  // The dispatch core's input rule (docs/reference/dispatch.md#input-check), built by
  // aitune.torch.module.tuned._input_rules.
  py::enum_<dispatch::ShapeRange>(m, "ShapeRange")
      .value("NONE", dispatch::ShapeRange::kNone)
      .value("ENVELOPE", dispatch::ShapeRange::kEnvelope)
      .value("PROFILE", dispatch::ShapeRange::kProfile);
  py::class_<dispatch::InputRule>(m, "InputRule")
      .def(py::init([](size_t leaf, const std::vector<std::string>& dtypes, std::string path,
                       std::string tensor_name, dispatch::ShapeRange range, std::vector<int64_t> min_shape,
                       const std::vector<std::optional<int64_t>>& max_shape) {
             if (min_shape.size() != max_shape.size()) {
               throw py::value_error("input rule for " + path + ": min and max shapes differ in rank");
             }
             dispatch::InputRule rule;
             rule.leaf = leaf;
             for (const std::string& dtype : dtypes)
               rule.dtypes.push_back(value_or_throw(dtype_from_name(dtype)));
             rule.path_repr = std::move(path);
             rule.tensor_name = std::move(tensor_name);
             rule.range = range;
             rule.min_shape = std::move(min_shape);
             for (const auto& size : max_shape)
               rule.max_shape.push_back(size.value_or(dispatch::kNoUpperBound));
             return rule;
           }),
           py::arg("leaf"), py::arg("dtypes"), py::arg("path"), py::arg("tensor_name"), py::arg("range"),
           py::arg("min_shape"), py::arg("max_shape"))
      .def_readonly("leaf", &dispatch::InputRule::leaf)
      .def_property_readonly("dtypes",
                             [](const dispatch::InputRule& r) {
                               std::vector<std::string> names;
                               for (c10::ScalarType t : r.dtypes) names.push_back(dtype_name(t));
                               return names;
                             })
      .def_readonly("path", &dispatch::InputRule::path_repr)
      .def_readonly("tensor_name", &dispatch::InputRule::tensor_name)
      .def_readonly("range", &dispatch::InputRule::range)
      .def_readonly("min_shape", &dispatch::InputRule::min_shape)
      .def_property_readonly("max_shape", [](const dispatch::InputRule& r) {
        std::vector<std::optional<int64_t>> out;
        for (int64_t size : r.max_shape)
          out.push_back(size == dispatch::kNoUpperBound ? std::nullopt : std::optional(size));
        return out;
      });

  py::class_<Dispatcher>(m, "Dispatcher")
      .def(py::init([](const Signature& sig, bool strict, int llm_param, std::string name, py::object on_miss,
                       py::object equal, py::object on_outside) {
             return new Dispatcher(sig, strict, llm_param, std::move(name), std::move(on_miss),
                                   std::move(equal), std::move(on_outside));
           }),
           py::arg("signature"), py::arg("strict"), py::arg("llm_param"), py::arg("module_name"),
           py::arg("on_miss"), py::arg("equal"), py::arg("on_outside"))
      .def(
          "add_graph",
          [](Dispatcher& d, const GraphKey& key, std::string name, py::object runner,
             const py::list& eq_checks, std::vector<dispatch::InputRule> input_rules,
             std::shared_ptr<Runner> native, std::vector<int64_t> input_order, py::object rebuild,
             std::string backend_desc) {
            GraphEntry entry{
                dispatch::GraphDispatch(std::move(name), d.module_name(), std::move(backend_desc),
                                        std::move(input_rules), std::move(native), std::move(input_order)),
                std::move(runner),
                std::move(rebuild),
                {}};
            for (auto item : eq_checks) {
              auto t = item.cast<py::tuple>();
              entry.eq_checks.emplace_back(t[0].cast<size_t>(), py::reinterpret_borrow<py::object>(t[1]));
            }
            d.add_graph(key, std::move(entry));
          },
          py::arg("key"), py::arg("name"), py::arg("runner"), py::arg("eq_checks"), py::arg("input_rules"),
          py::arg("native") = nullptr, py::arg("input_order") = std::vector<int64_t>{},
          py::arg("rebuild") = py::none(), py::arg("backend_desc") = "")
      .def("__call__",
           [](const Dispatcher& d, py::args args, py::kwargs kwargs) { return d.call(args, kwargs); })
      .def("call", &Dispatcher::call)
      .def("key_of", &Dispatcher::key_of)
      .def_property_readonly("num_graphs", &Dispatcher::num_graphs);

  // One probe for both forms: probing loads and initialises the driver libraries.
  m.def("environment_report", [] {
    const EnvironmentInfo info = probe_environment();
    return py::make_tuple(to_json(info), to_text(info));
  });

  // Drop cached Python objects before the interpreter finalises.
  auto atexit = py::module_::import("atexit");
  atexit.attr("register")(py::cpp_function([] { clear_type_rules(); }));
}
