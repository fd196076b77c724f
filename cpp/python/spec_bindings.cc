#include "spec_bindings.h"

#include <pybind11/stl.h>

#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "errors.h"
#include "spec/dynamic_dims.h"
#include "spec/graph_key.h"
#include "spec/tensor_spec.h"

namespace aitune::python {
namespace py = pybind11;

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

void register_graph_key(py::module_& m) {
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
}

void register_tensor_spec(py::module_& m) {
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
}

void register_dim_defs(py::module_& m) {
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
}

}  // namespace

void register_spec_bindings(py::module_& m) {
  register_graph_key(m);
  register_tensor_spec(m);
  register_dim_defs(m);
}

}  // namespace aitune::python
