// Binding of a call's (args, kwargs) to a forward signature, in C++ so the tuned call path
// binds without inspect.Signature (docs/reference/dispatch.md#per-call-pipeline step 1). Defaults are not
// applied, so m(x) and m(x=x) bind identically (docs/reference/recording.md#binding-flattening-and-names).
// Errors mirror inspect.Signature.bind's TypeErrors.
#pragma once

#include <pybind11/pybind11.h>

#include <string>
#include <utility>
#include <vector>

namespace aitune::python {

namespace py = pybind11;

// inspect.Parameter kinds, numbered as Python numbers them.
enum class ParamKind : int {
  kPositionalOnly = 0,
  kPositionalOrKeyword = 1,
  kVarPositional = 2,
  kKeywordOnly = 3,
  kVarKeyword = 4,
};

struct Param {
  std::string name;
  py::str name_obj;
  ParamKind kind;
  bool has_default;
};

// One bound argument: the parameter index and the value. `value` owns a reference (for
// *args / **kwargs it is a new tuple / dict).
struct BoundArg {
  size_t param;
  py::object value;
};

class Signature {
 public:
  // `params`: list of (name, kind, has_default) triples as aitune.torch.module stores them.
  explicit Signature(const py::list& params);

  // Binds in signature order into `out` (cleared first). Throws py::type_error like
  // inspect.Signature.bind.
  void bind(const py::tuple& args, const py::dict& kwargs, std::vector<BoundArg>& out) const;

  const std::vector<Param>& params() const { return params_; }
  py::list to_list() const;

 private:
  std::vector<Param> params_;
  int var_positional_ = -1;
  int var_keyword_ = -1;
};

}  // namespace aitune::python
