#include "manifest_bindings.h"

#include <pybind11/stl.h>

#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "checkpoint/manifest_backend.h"
#include "checkpoint/manifest_schema.h"
#include "checkpoint/state_schema.h"
#include "checkpoint/zip_archive.h"
#include "errors.h"
#include "runtime/runtime.h"

namespace aitune::python {
namespace py = pybind11;

namespace {

// A part the manifest keeps as JSON text, as a Python value. The text is nlohmann's dump of a
// schema-checked document (nesting <= 64), so json.loads reads it without surprises.
py::object decoded(const std::string& text) {
  if (text.empty()) return py::none();
  return py::module_::import("json").attr("loads")(text);
}

py::object none_if_empty(const std::string& s) { return s.empty() ? py::none() : py::object(py::str(s)); }

// The semantic path as Python holds it (checkpoint/graphs.py): a str or int step, or a tuple.
py::object semantic_path(const ManifestSemanticPath& path) {
  py::list steps;
  for (const auto& step : path.steps) {
    if (const auto* name = std::get_if<std::string>(&step)) {
      steps.append(py::str(*name));
    } else {
      steps.append(py::int_(std::get<int64_t>(step)));
    }
  }
  if (path.is_tuple) return py::tuple(steps);
  return steps.empty() ? py::none() : py::object(steps[0]);
}

template <typename T>
T checked(StatusOr<T> read, const std::string& where) {
  if (!read.ok()) throw_status({read.status().code(), where + read.status().message()});
  return std::move(read).value();
}

void register_structs(py::module_& m) {
  py::class_<FileRecord>(m, "FileRecord", "One archive entry as the manifest lists it.")
      .def_readonly("path", &FileRecord::path)
      .def_readonly("size", &FileRecord::size)
      .def_readonly("sha256", &FileRecord::sha256);

  py::class_<ManifestParam>(m, "ManifestParam", "One forward_signature entry.")
      .def_readonly("name", &ManifestParam::name)
      .def_readonly("kind", &ManifestParam::kind)
      .def_readonly("has_default", &ManifestParam::has_default);

  py::class_<ManifestLeaf>(m, "ManifestLeaf", "One leaf of an input or output spec.")
      .def_property_readonly("semantic_path",
                             [](const ManifestLeaf& l) { return semantic_path(l.semantic_steps); })
      .def_readonly("display_path", &ManifestLeaf::semantic_path)
      .def_readonly("access_path", &ManifestLeaf::access_path)
      .def_readonly("name", &ManifestLeaf::name)
      .def_readonly("is_tensor", &ManifestLeaf::is_tensor)
      .def_readonly("shape", &ManifestLeaf::shape)
      .def_readonly("axis_kinds", &ManifestLeaf::axis_kinds)
      .def_readonly("min_shape", &ManifestLeaf::min_shape)
      .def_readonly("max_shape", &ManifestLeaf::max_shape)
      .def_readonly("multipliers", &ManifestLeaf::multipliers)
      .def_readonly("dtype", &ManifestLeaf::dtype)
      .def_readonly("dtypes", &ManifestLeaf::dtypes)
      .def_property_readonly("value", [](const ManifestLeaf& l) { return decoded(l.value_json); })
      .def_readonly("needs_eq", &ManifestLeaf::needs_eq);

  // The backend entry's fields come from its one table (manifest_backend.h), decoded from JSON.
  py::class_<ManifestBackend> backend(m, "ManifestBackend",
                                      "A graph's backend entry; `name` is the stable name in either format.");
  py::tuple names(backend_fields().size());
  for (size_t i = 0; i < backend_fields().size(); ++i) {
    const BackendField& field = backend_fields()[i];
    backend.def_property_readonly(field.key,
                                  [json = field.json](const ManifestBackend& b) { return decoded(json(b)); });
    names[i] = field.key;
  }
  m.attr("MANIFEST_BACKEND_FIELDS") = names;

  py::class_<ManifestGraph>(m, "ManifestGraph", "One graph: its spec, backend and samples.")
      .def_readonly("name", &ManifestGraph::name)
      .def_readonly("key_tokens", &ManifestGraph::key_tokens)
      .def_readonly("llm_phase", &ManifestGraph::llm_phase)
      .def_readonly("inputs", &ManifestGraph::inputs)
      .def_readonly("outputs", &ManifestGraph::outputs)
      .def_readonly("backend", &ManifestGraph::backend)
      .def_readonly("samples", &ManifestGraph::samples)
      .def_property_readonly("correctness",
                             [](const ManifestGraph& g) { return decoded(g.correctness_json); });

  py::class_<ManifestModule>(m, "ManifestModule", "One tuned module and where it sits in the saved object.")
      .def_readonly("name", &ManifestModule::name)
      .def_readonly("prefix", &ManifestModule::prefix)
      .def_readonly("class_name", &ManifestModule::class_name)
      .def_readonly("strict_mode", &ManifestModule::strict_mode)
      .def_readonly("fallback_policy", &ManifestModule::fallback_policy)
      .def_property_readonly("weights", [](const ManifestModule& mm) { return decoded(mm.weights_json); })
      .def_readonly("forward_signature", &ManifestModule::forward_signature)
      .def_property_readonly("dynamic_shapes",
                             [](const ManifestModule& mm) { return decoded(mm.dynamic_shapes_json); })
      .def_readonly("graphs", &ManifestModule::graphs);

  py::class_<ManifestRoot>(m, "ManifestRoot", "The saved object: a module or a pipeline.")
      .def_readonly("kind", &ManifestRoot::kind)
      .def_readonly("class_name", &ManifestRoot::class_name)
      .def_property_readonly("weights", [](const ManifestRoot& r) { return decoded(r.weights_json); });

  py::class_<Manifest>(m, "Manifest", "A checkpoint manifest, schema-checked and typed (read_manifest).")
      .def_readonly("format_version", &Manifest::format_version)
      .def_readonly("kind", &Manifest::kind)
      .def_readonly("results_key", &Manifest::results_key)
      .def_readonly("aitune_version", &Manifest::aitune_version)
      .def_readonly("created_at", &Manifest::created_at)
      .def_readonly("fingerprint", &Manifest::fingerprint)
      .def_readonly("root", &Manifest::root)
      .def_readonly("modules", &Manifest::modules)
      .def_readonly("files", &Manifest::files)
      .def_readonly("sha512", &Manifest::sha512);
}

// The current fingerprint (checkpoint/fingerprint.h's one builder): the environment probe's facts,
// with what the Python process knows better (torch.__version__ keeps its local suffix) and the
// versions of its packages (None: not installed).
void register_fingerprint(py::module_& m) {
  using Text = std::optional<std::string>;
  m.def(
      "current_fingerprint",
      [](int device_index, const std::string& torch, const Text& cuda_runtime, const Text& tensorrt,
         const Text& torch_tensorrt, const Text& onnxruntime) {
        FingerprintSources s = fingerprint_sources(device_index);
        s.torch = torch;
        s.cuda_runtime = cuda_runtime.value_or("");
        s.has_packages = true;
        s.tensorrt = tensorrt.value_or("");
        s.torch_tensorrt = torch_tensorrt.value_or("");
        s.onnxruntime = onnxruntime.value_or("");
        py::dict out;
        for (const auto& [field, value] : build_fingerprint(s)) out[py::str(field)] = value;
        return out;
      },
      py::arg("device_index"), py::arg("torch"), py::arg("cuda_runtime"), py::arg("tensorrt"),
      py::arg("torch_tensorrt"), py::arg("onnxruntime"),
      "The environment fingerprint saved in checkpoints, for the GPU of `device_index` (field -> str or "
      "None).");
}

}  // namespace

Manifest read_archive_manifest(const ArchiveReader& reader) {
  StatusOr<Manifest> read = Status(StatusCode::kInternal, "not read");
  {
    py::gil_scoped_release no_gil;  // parses and checks the whole document
    read = read_manifest(reader.manifest_bytes());
  }
  return checked(std::move(read), "Checkpoint '" + reader.path() + "': ");
}

void register_manifest_bindings(py::module_& m) {
  register_structs(m);
  register_fingerprint(m);
  m.attr("MANIFEST_FORMAT") = kManifestFormat;
  m.attr("MANIFEST_RESULTS_KIND") = kManifestResultsKind;
  m.def(
      "read_manifest",
      [](const std::string& text) {
        StatusOr<Manifest> read = Status(StatusCode::kInternal, "not read");
        {
          py::gil_scoped_release no_gil;
          read = read_manifest(text);
        }
        return checked(std::move(read), "");
      },
      py::arg("text"),
      "The typed manifest of manifest.json's text after the schema check (CorruptCheckpointError, "
      "UnsupportedCheckpointError otherwise); ArchiveReader.read_manifest reads an archive's.");
  m.def(
      "read_state_manifest",
      [](const std::string& text) {
        StatusOr<nlohmann::json> read = Status(StatusCode::kInternal, "not read");
        std::string checked_text;
        {
          py::gil_scoped_release no_gil;
          read = parse_state_manifest(text);
          if (read.ok()) checked_text = read->dump();
        }
        checked(std::move(read), "");
        return decoded(checked_text);
      },
      py::arg("text"),
      "A LocalTorchStorage state dict's manifest.json after its schema check (state_schema.h), as a dict; "
      "CorruptCheckpointError or UnsupportedCheckpointError otherwise.");
  m.def(
      "read_graph_spec",
      [](const std::string& text) {
        StatusOr<ManifestGraph> read = Status(StatusCode::kInternal, "not read");
        {
          py::gil_scoped_release no_gil;
          read = read_graph_spec(text);
        }
        return checked(std::move(read), "");
      },
      py::arg("text"),
      "A graph spec as checkpoint/graphs.py graph_to_json writes it (JSON text), checked as the manifest "
      "schema checks a graph's own fields, as a ManifestGraph without backend or samples.");
}

}  // namespace aitune::python
