#include "flatten.h"

#include <torch/csrc/autograd/python_variable.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <string_view>
#include <unordered_map>

namespace aitune::python {
namespace {

enum class TypeRule : int { kLeaf = 0, kIgnore = 1, kMappingData = 2, kFields = 3, kUserType = 4 };

struct TypeEntry {
  TypeRule rule = TypeRule::kLeaf;
  std::vector<py::str> fields;  // kFields only
};

// Per-type decisions of the Python rule table. Guarded by the GIL (every caller holds it).
struct TypeRules {
  py::object classify_fn;
  py::object attrs_fn;
  std::unordered_map<PyTypeObject*, TypeEntry> cache;
};

TypeRules& type_rules() {
  static TypeRules* rules = new TypeRules();  // leaked on purpose: outlives interpreter teardown order
  return *rules;
}

const TypeEntry& entry_for(PyTypeObject* type) {
  auto& rules = type_rules();
  auto it = rules.cache.find(type);
  if (it != rules.cache.end()) return it->second;
  TypeEntry entry;
  if (rules.classify_fn) {
    py::tuple result = rules.classify_fn(py::handle(reinterpret_cast<PyObject*>(type)));
    entry.rule = static_cast<TypeRule>(result[0].cast<int>());
    if (entry.rule == TypeRule::kFields) {
      for (auto name : result[1]) entry.fields.push_back(py::reinterpret_borrow<py::str>(name));
    }
  }
  return rules.cache.emplace(type, std::move(entry)).first->second;
}

std::string_view utf8(PyObject* str) {
  Py_ssize_t size = 0;
  const char* data = PyUnicode_AsUTF8AndSize(str, &size);
  if (data == nullptr) throw py::error_already_set();
  return {data, static_cast<size_t>(size)};
}

uint64_t int_token(int64_t v) { return static_cast<uint64_t>(v) * 0x9E3779B97F4A7C15ull + 0x1234567ull; }

// Hash of a builtin constant under Python's == (1 == 1.0 == True share a hash). Returns
// false for types the key cannot summarise exactly.
bool builtin_constant_hash(PyObject* obj, uint64_t& out) {
  if (obj == Py_None) {
    out = stable_hash("None");
    return true;
  }
  if (PyBool_Check(obj) || PyLong_Check(obj)) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (overflow != 0) {
      py::str text = py::repr(obj);
      out = stable_hash(utf8(text.ptr())) ^ 0x51ull;
      return true;
    }
    out = int_token(v);
    return true;
  }
  if (PyFloat_Check(obj)) {
    double d = PyFloat_AS_DOUBLE(obj);
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e18) {
      out = int_token(static_cast<int64_t>(d));
    } else {
      uint64_t bits = 0;
      std::memcpy(&bits, &d, sizeof(bits));
      out = bits * 0xff51afd7ed558ccdull;
    }
    return true;
  }
  if (PyUnicode_Check(obj)) {
    out = stable_hash(utf8(obj)) ^ 0x53ull;
    return true;
  }
  return false;
}

struct Walker {
  const FlattenOptions& options;
  FlatCall& out;
  std::vector<PathStep> path;

  void leaf(PyObject* obj, bool is_tensor, bool needs_eq) {
    out.leaves.push_back(Leaf{py::reinterpret_borrow<py::object>(obj), is_tensor, needs_eq});
    if (options.want_paths) out.paths.push_back(path);
  }

  void push_step(char kind, py::handle key) {
    if (options.want_paths) path.push_back(PathStep{kind, py::reinterpret_borrow<py::object>(key)});
  }
  void pop_step() {
    if (options.want_paths) path.pop_back();
  }

  void constant(PyObject* obj) {
    if (!options.strict) {
      out.key.add_opaque_value();
      leaf(obj, false, false);
      return;
    }
    uint64_t h = 0;
    if (builtin_constant_hash(obj, h)) {
      out.key.add_value(h);
      leaf(obj, false, false);
      return;
    }
    // Other values (enums, arbitrary objects, unhashable ones): summarised by type here and
    // confirmed with == by the dispatcher, which is what docs/reference/recording.md#graph-identity asks for.
    out.key.add_value(stable_hash(Py_TYPE(obj)->tp_name) ^ 0x4full);
    leaf(obj, false, true);
  }

  void sequence(PyObject* obj) {
    const bool is_tuple = PyTuple_Check(obj);
    const Py_ssize_t n = is_tuple ? PyTuple_GET_SIZE(obj) : PyList_GET_SIZE(obj);
    out.key.add_container(ContainerKind::kSequence, static_cast<size_t>(n));
    for (Py_ssize_t i = 0; i < n; ++i) {
      // A list can be mutated by a callee only while we call into Python, which the walk does
      // not do for builtin items; hold a reference anyway for user-type children.
      py::object item =
          py::reinterpret_borrow<py::object>(is_tuple ? PyTuple_GET_ITEM(obj, i) : PyList_GET_ITEM(obj, i));
      out.key.add_index(i);
      if (options.want_paths) push_step('i', py::int_(i));
      walk(item.ptr());
      pop_step();
    }
  }

  void mapping(PyObject* dict) {
    // Dict order never matters (docs/reference/recording.md#graph-identity): children are visited in a
    // canonical key order.
    struct Item {
      PyObject* key;
      PyObject* value;
      std::string sort_text;
      int64_t sort_int = 0;
      int cls = 0;  // 0 str, 1 int, 2 other (by repr)
    };
    thread_local std::vector<std::vector<Item>> pool;
    thread_local size_t depth = 0;
    if (pool.size() <= depth) pool.resize(depth + 1);
    std::vector<Item>& items = pool[depth];
    items.clear();
    PyObject* key;
    PyObject* value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(dict, &pos, &key, &value)) {
      Item item{key, value, {}, 0, 0};
      if (PyUnicode_Check(key)) {
        item.sort_text.assign(utf8(key));
      } else if (PyLong_Check(key) && !PyBool_Check(key)) {
        item.cls = 1;
        item.sort_int = PyLong_AsLongLong(key);
        if (item.sort_int == -1 && PyErr_Occurred()) throw py::error_already_set();
      } else {
        item.cls = 2;
        item.sort_text = py::repr(key).cast<std::string>();
      }
      items.push_back(std::move(item));
    }
    std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
      if (a.cls != b.cls) return a.cls < b.cls;
      if (a.cls == 1) return a.sort_int < b.sort_int;
      return a.sort_text < b.sort_text;
    });
    out.key.add_container(ContainerKind::kMapping, items.size());
    // Hold references: walking a child may call Python (user types) and the dict may change.
    std::vector<std::pair<py::object, py::object>> held;
    held.reserve(items.size());
    for (const Item& item : items) {
      if (item.cls == 1) {
        out.key.add_index(item.sort_int);
      } else {
        out.key.add_key(item.sort_text);
      }
      held.emplace_back(py::reinterpret_borrow<py::object>(item.key),
                        py::reinterpret_borrow<py::object>(item.value));
    }
    ++depth;
    try {
      for (auto& [k, v] : held) {
        push_step('k', k);
        walk(v.ptr());
        pop_step();
      }
    } catch (...) {
      --depth;
      throw;
    }
    --depth;
  }

  void attributes(PyObject* obj, const std::vector<py::str>& names) {
    out.key.add_container(ContainerKind::kObject, names.size());
    for (const auto& name : names) {
      out.key.add_key(utf8(name.ptr()));
    }
    for (const auto& name : names) {
      py::object child = py::reinterpret_steal<py::object>(PyObject_GetAttr(obj, name.ptr()));
      if (!child) throw py::error_already_set();
      push_step('a', name);
      walk(child.ptr());
      pop_step();
    }
  }

  void walk(PyObject* obj) {
    if (THPVariable_Check(obj)) {
      out.key.add_tensor(THPVariable_Unpack(obj).dim());
      leaf(obj, true, false);
      return;
    }
    if (PyTuple_Check(obj) || PyList_Check(obj)) return sequence(obj);
    if (PyDict_Check(obj)) return mapping(obj);
    if (obj == Py_None || PyBool_Check(obj) || PyLong_Check(obj) || PyFloat_Check(obj) ||
        PyUnicode_Check(obj)) {
      return constant(obj);
    }
    const TypeEntry& entry = entry_for(Py_TYPE(obj));
    switch (entry.rule) {
      case TypeRule::kLeaf: return constant(obj);
      case TypeRule::kIgnore: return;
      case TypeRule::kMappingData: {
        py::object data = py::reinterpret_borrow<py::object>(obj).attr("data");
        if (!PyDict_Check(data.ptr())) return constant(obj);
        return mapping(data.ptr());
      }
      case TypeRule::kFields: return attributes(obj, entry.fields);
      case TypeRule::kUserType: {
        std::vector<py::str> names;
        for (auto name : type_rules().attrs_fn(py::handle(obj)))
          names.push_back(py::reinterpret_borrow<py::str>(name));
        return attributes(obj, names);
      }
    }
  }
};

bool is_prefill(PyObject* cache_position) {
  const at::Tensor& t = THPVariable_Unpack(cache_position);
  if (t.numel() == 0) return true;
  return t.reshape({-1})[0].item<int64_t>() == 0;
}

}  // namespace

void flatten_arguments(const Signature& sig, const std::vector<BoundArg>& bound,
                       const FlattenOptions& options, FlatCall& out) {
  out.clear();
  Walker walker{options, out, {}};
  out.key.add_container(ContainerKind::kArguments, bound.size());
  const auto& params = sig.params();
  PyObject* cache_position = nullptr;
  for (const BoundArg& arg : bound) {
    out.key.add_key(params[arg.param].name);
    if (static_cast<int>(arg.param) == options.llm_param && THPVariable_Check(arg.value.ptr())) {
      cache_position = arg.value.ptr();
    }
  }
  for (const BoundArg& arg : bound) {
    walker.push_step('p', params[arg.param].name_obj);
    walker.walk(arg.value.ptr());
    walker.pop_step();
  }
  if (cache_position != nullptr) {
    // LLM mode (docs/reference/recording.md#graph-identity): identity is the phase alone.
    out.key.clear();
    out.key.add_llm_phase(is_prefill(cache_position));
  }
}

void flatten_value(py::handle value, const FlattenOptions& options, FlatCall& out) {
  out.clear();
  Walker walker{options, out, {}};
  walker.walk(value.ptr());
}

void set_type_rules(py::object classify_fn, py::object attrs_fn) {
  auto& rules = type_rules();
  rules.classify_fn = std::move(classify_fn);
  rules.attrs_fn = std::move(attrs_fn);
  rules.cache.clear();
}

void invalidate_type_rules() { type_rules().cache.clear(); }

void clear_type_rules() {
  auto& rules = type_rules();
  rules.cache.clear();
  rules.classify_fn = py::object();
  rules.attrs_fn = py::object();
}

py::tuple path_to_python(const std::vector<PathStep>& path) {
  py::tuple result(path.size());
  for (size_t i = 0; i < path.size(); ++i) {
    result[i] = py::make_tuple(py::str(std::string(1, path[i].kind)), path[i].key);
  }
  return result;
}

namespace {

py::object flat_to_python(const FlatCall& flat) {
  py::list leaves;
  for (size_t i = 0; i < flat.leaves.size(); ++i) {
    const Leaf& leaf = flat.leaves[i];
    py::object path = flat.paths.empty() ? py::none() : py::object(path_to_python(flat.paths[i]));
    leaves.append(py::cast(PyLeaf{path, leaf.value, leaf.is_tensor, leaf.needs_eq}));
  }
  return py::make_tuple(flat.key, leaves);
}

}  // namespace

void register_flatten_bindings(py::module_& m) {
  py::class_<PyLeaf>(m, "Leaf", "One flattened leaf: its path, value and how the dispatcher checks it.")
      .def(py::init<py::object, py::object, bool, bool>(), py::arg("path"), py::arg("value"),
           py::arg("is_tensor"), py::arg("needs_eq") = false)
      .def_readonly("path", &PyLeaf::path,
                    "Tuple of (kind, key) steps: 'p' parameter, 'k' key, 'i' index, 'a' attribute.")
      .def_readonly("value", &PyLeaf::value)
      .def_readonly("is_tensor", &PyLeaf::is_tensor)
      .def_readonly(
          "needs_eq", &PyLeaf::needs_eq,
          "A non-builtin constant the key summarises by type only: the dispatcher confirms it with ==.")
      .def("__repr__", [](const PyLeaf& leaf) {
        return "Leaf(path=" + py::repr(leaf.path).cast<std::string>() +
               ", is_tensor=" + (leaf.is_tensor ? "True" : "False") +
               ", needs_eq=" + (leaf.needs_eq ? "True" : "False") + ")";
      });

  m.def(
      "flatten_call",
      [](const Signature& sig, const py::tuple& args, const py::dict& kwargs, bool strict, int llm_param) {
        std::vector<BoundArg> bound;
        sig.bind(args, kwargs, bound);
        FlatCall flat;
        flatten_arguments(sig, bound, FlattenOptions{strict, true, llm_param}, flat);
        return flat_to_python(flat);
      },
      py::arg("signature"), py::arg("args"), py::arg("kwargs"), py::arg("strict"), py::arg("llm_param") = -1,
      "Binds and flattens a call: (GraphKey, [Leaf, ...]).");
  m.def(
      "flatten_value",
      [](py::handle value) {
        FlatCall flat;
        flatten_value(value, FlattenOptions{false, true, -1}, flat);
        return flat_to_python(flat);
      },
      py::arg("value"), "Flattens a forward's output: (GraphKey, [Leaf, ...]).");
  m.def("set_type_rules", &set_type_rules, py::arg("classify"), py::arg("attributes"));
  m.def("invalidate_type_rules", &invalidate_type_rules);
}

}  // namespace aitune::python
