#include "signature.h"

namespace aitune::python {

Signature::Signature(const py::list& params) {
  for (const auto& item : params) {
    auto triple = item.cast<py::tuple>();
    Param p{triple[0].cast<std::string>(), py::str(triple[0]), static_cast<ParamKind>(triple[1].cast<int>()),
            triple[2].cast<bool>()};
    if (static_cast<int>(p.kind) < 0 || static_cast<int>(p.kind) > 4) {
      throw py::value_error("invalid parameter kind for '" + p.name + "'");
    }
    if (p.kind == ParamKind::kVarPositional) var_positional_ = static_cast<int>(params_.size());
    if (p.kind == ParamKind::kVarKeyword) var_keyword_ = static_cast<int>(params_.size());
    params_.push_back(std::move(p));
  }
}

py::list Signature::to_list() const {
  py::list out;
  for (const auto& p : params_) out.append(py::make_tuple(p.name, static_cast<int>(p.kind), p.has_default));
  return out;
}

void Signature::bind(const py::tuple& args, const py::dict& kwargs, std::vector<BoundArg>& out) const {
  out.clear();
  // Values per parameter, filled positionally then by keyword; a null handle means unbound.
  // Signatures are short, so a small linear scan beats a hash map here.
  thread_local std::vector<PyObject*> slots;
  slots.assign(params_.size(), nullptr);
  py::tuple rest;
  py::dict extra;

  const size_t nargs = args.size();
  size_t i = 0;
  size_t p = 0;
  for (; i < nargs && p < params_.size(); ++i) {
    const ParamKind kind = params_[p].kind;
    if (kind != ParamKind::kPositionalOnly && kind != ParamKind::kPositionalOrKeyword) break;
    slots[p++] = PyTuple_GET_ITEM(args.ptr(), i);
  }
  if (i < nargs) {
    if (var_positional_ < 0) throw py::type_error("too many positional arguments");
    rest = py::reinterpret_steal<py::tuple>(
        PyTuple_GetSlice(args.ptr(), static_cast<Py_ssize_t>(i), static_cast<Py_ssize_t>(nargs)));
  }

  for (auto item : kwargs) {
    PyObject* key = item.first.ptr();
    bool placed = false;
    for (size_t k = 0; k < params_.size(); ++k) {
      const Param& param = params_[k];
      if (param.kind != ParamKind::kPositionalOrKeyword && param.kind != ParamKind::kKeywordOnly) continue;
      int eq = PyUnicode_Compare(key, param.name_obj.ptr());
      if (eq == -1 && PyErr_Occurred()) throw py::error_already_set();
      if (eq != 0) continue;
      if (slots[k] != nullptr) throw py::type_error("multiple values for argument '" + param.name + "'");
      slots[k] = item.second.ptr();
      placed = true;
      break;
    }
    if (placed) continue;
    if (var_keyword_ < 0) {
      throw py::type_error("got an unexpected keyword argument '" + py::str(item.first).cast<std::string>() +
                           "'");
    }
    extra[item.first] = item.second;
  }

  for (size_t k = 0; k < params_.size(); ++k) {
    const Param& param = params_[k];
    if (static_cast<int>(k) == var_positional_) {
      if (rest) out.push_back({k, rest});
      continue;
    }
    if (static_cast<int>(k) == var_keyword_) {
      if (extra.size() > 0) out.push_back({k, extra});
      continue;
    }
    if (slots[k] == nullptr) {
      if (!param.has_default) throw py::type_error("missing a required argument: '" + param.name + "'");
      continue;
    }
    out.push_back({k, py::reinterpret_borrow<py::object>(slots[k])});
  }
}

}  // namespace aitune::python
