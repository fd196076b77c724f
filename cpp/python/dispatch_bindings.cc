#include "dispatch_bindings.h"

#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bridge/tensor_bridge.h"
#include "dispatcher.h"
#include "errors.h"

namespace aitune::python {
namespace py = pybind11;

namespace {

void register_input_rule(py::module_& m) {
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
}

void register_dispatcher(py::module_& m) {
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
}

}  // namespace

void register_dispatch_bindings(py::module_& m) {
  register_input_rule(m);
  register_dispatcher(m);
}

}  // namespace aitune::python
