#include "checkpoint_bindings.h"

#include <pybind11/stl.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "checkpoint/backend_names.h"
#include "checkpoint/extraction_cache.h"
#include "checkpoint/fingerprint.h"
#include "checkpoint/manifest_schema.h"
#include "checkpoint/zip_archive.h"
#include "errors.h"
#include "manifest_bindings.h"

namespace aitune::python {
namespace py = pybind11;

namespace {

// str or os.PathLike -> str.
std::string fspath(py::handle path) {
  return py::str(py::module_::import("os").attr("fspath")(path)).cast<std::string>();
}

// Records come from a manifest, so a malformed one is a damaged checkpoint, not a usage error.
// Extra keys are ignored so later manifest versions can add fields.
FileRecord record_from_python(py::handle obj) {
  if (!py::isinstance<py::dict>(obj)) {
    throw_status({StatusCode::kCorrupt,
                  "Invalid file record in checkpoint manifest: expected a dict with path, "
                  "size and sha256, got " +
                      std::string(py::str(py::repr(obj)))});
  }
  const auto d = py::reinterpret_borrow<py::dict>(obj);
  for (const char* key : {"path", "size", "sha256"}) {
    if (!d.contains(key)) {
      throw_status(
          {StatusCode::kCorrupt, std::string("Invalid file record in checkpoint manifest: missing '") + key +
                                     "' in " + std::string(py::str(py::repr(obj)))});
    }
  }
  try {
    return FileRecord{d["path"].cast<std::string>(), d["size"].cast<uint64_t>(),
                      d["sha256"].cast<std::string>()};
  } catch (const py::cast_error&) {
    throw_status({StatusCode::kCorrupt,
                  "Invalid file record in checkpoint manifest: " + std::string(py::str(py::repr(obj))) +
                      "; expected path: str, size: int >= 0, sha256: str"});
  }
}

std::vector<FileRecord> records_from_python(py::handle files) {
  std::vector<FileRecord> out;
  for (auto item : py::iter(files)) out.push_back(record_from_python(item));
  return out;
}

py::dict record_to_python(const FileRecord& r) {
  py::dict d;
  d["path"] = r.path;
  d["size"] = r.size;
  d["sha256"] = r.sha256;
  return d;
}

// A contiguous read-only view of any buffer-protocol object (bytes, bytearray, memoryview,
// numpy array), released on destruction. Must be destroyed with the GIL held.
class BufferView {
 public:
  explicit BufferView(py::handle obj) {
    if (PyObject_GetBuffer(obj.ptr(), &view_, PyBUF_SIMPLE) != 0) throw py::error_already_set();
  }
  BufferView(const BufferView&) = delete;
  BufferView& operator=(const BufferView&) = delete;
  ~BufferView() { PyBuffer_Release(&view_); }
  std::string_view data() const {
    return {static_cast<const char*>(view_.buf), static_cast<size_t>(view_.len)};
  }

 private:
  Py_buffer view_{};
};

// Python threads may share one writer; the GIL is released while files are hashed and written,
// so a mutex (taken after releasing the GIL, never the other way round) serialises the calls.
struct PyArchiveWriter {
  explicit PyArchiveWriter(ArchiveWriter w) : writer(std::move(w)) {}
  ArchiveWriter writer;
  std::mutex mu;
};

// A fingerprint dict as the comparison reads it: str values as they are, None absent-valued, any
// other value (a number a hand-edited manifest holds) as its JSON text, as the C++ reader keeps it.
Fingerprint fingerprint_from_python(py::handle obj, const char* what) {
  if (!py::isinstance<py::dict>(obj)) throw py::type_error(std::string(what) + " must be a dict");
  py::object dumps = py::module_::import("json").attr("dumps");
  Fingerprint out;
  for (auto [key, value] : py::reinterpret_borrow<py::dict>(obj)) {
    const std::string field = py::str(key).cast<std::string>();
    if (value.is_none()) {
      out[field] = std::nullopt;
    } else if (py::isinstance<py::str>(value)) {
      out[field] = value.cast<std::string>();
    } else {
      out[field] = dumps(value).cast<std::string>();
    }
  }
  return out;
}

py::object optional_text(const std::optional<std::string>& v) {
  return v ? py::object(py::str(*v)) : py::none();
}

void register_archive_writer(py::module_& m) {
  py::class_<PyArchiveWriter>(m, "ArchiveWriter",
                              "Writes a .ait archive under a temporary name; finish() renames it into "
                              "place. Dropping an unfinished writer removes the temporary file.")
      // force_zip64 is for tests: ZIP64 records even where every value fits in 32 bits.
      .def(py::init([](py::handle path, bool force_zip64) {
             return std::make_unique<PyArchiveWriter>(value_or_throw(
                 ArchiveWriter::create(fspath(path), ZipWriteOptions{.force_zip64 = force_zip64})));
           }),
           py::arg("path"), py::kw_only(), py::arg("force_zip64") = false)
      .def(
          "add_file",
          [](PyArchiveWriter& w, std::string name, py::handle source) {
            std::string src = fspath(source);
            Status s;
            {
              py::gil_scoped_release no_gil;  // streams and hashes the file
              std::lock_guard<std::mutex> lock(w.mu);
              s = w.writer.add_file(std::move(name), std::move(src));
            }
            ok_or_throw(s);
          },
          py::arg("name"), py::arg("source_path"))
      .def(
          "add_bytes",
          [](PyArchiveWriter& w, std::string name, py::handle data) {
            const BufferView buffer(data);  // outlives the GIL release below
            Status s;
            {
              py::gil_scoped_release no_gil;  // hashes and copies the bytes
              std::lock_guard<std::mutex> lock(w.mu);
              s = w.writer.add_bytes(std::move(name), buffer.data());
            }
            ok_or_throw(s);
          },
          py::arg("name"), py::arg("data"))
      .def("files",
           [](PyArchiveWriter& w) {
             std::vector<FileRecord> files;
             {
               py::gil_scoped_release no_gil;
               std::lock_guard<std::mutex> lock(w.mu);
               files = w.writer.files();
             }
             py::list out;
             for (const auto& f : files) out.append(record_to_python(f));
             return out;
           })
      .def(
          "finish",
          [](PyArchiveWriter& w, std::string manifest) {
            Status s;
            {
              py::gil_scoped_release no_gil;  // copies every entry, fsyncs, renames
              std::lock_guard<std::mutex> lock(w.mu);
              s = w.writer.finish(manifest);
            }
            ok_or_throw(s);
          },
          py::arg("manifest"))
      .def(
          "abandon",
          [](PyArchiveWriter& w) {
            std::lock_guard<std::mutex> lock(w.mu);
            w.writer.abandon();
          },
          "Removes the temporary file of an unfinished writer now (a no-op after finish()); the writer is "
          "spent. An error or Ctrl-C half-way keeps the writer alive as long as its traceback.")
      .def_property_readonly("path", [](const PyArchiveWriter& w) { return w.writer.final_path(); })
      .def_property_readonly("temp_path", [](const PyArchiveWriter& w) { return w.writer.temp_path(); });
}

void register_archive_reader(py::module_& m) {
  py::class_<ArchiveReader>(
      m, "ArchiveReader",
      "Reads a .ait archive through a memory mapping; entries are verified against their "
      "manifest record the first time they are read or extracted. Thread-safe.")
      .def(py::init([](py::handle path) {
             std::string p = fspath(path);
             StatusOr<ArchiveReader> reader = Status(StatusCode::kInternal, "not opened");
             {
               py::gil_scoped_release no_gil;
               reader = ArchiveReader::open(std::move(p));
             }
             return std::make_unique<ArchiveReader>(value_or_throw(std::move(reader)));
           }),
           py::arg("path"))
      .def_property_readonly("path", &ArchiveReader::path)
      .def("manifest",
           [](const ArchiveReader& r) {
             const std::string_view bytes = r.manifest_bytes();
             PyObject* text =
                 PyUnicode_DecodeUTF8(bytes.data(), static_cast<Py_ssize_t>(bytes.size()), "strict");
             if (text == nullptr) {
               PyErr_Clear();
               throw_status({StatusCode::kCorrupt,
                             "Checkpoint '" + r.path() + "' is corrupt: manifest.json is not UTF-8"});
             }
             return py::reinterpret_steal<py::str>(text);
           })
      .def("read_manifest", &read_archive_manifest,
           "The manifest after the schema check the C++ runtime runs too, as typed objects "
           "(_C.Manifest); CorruptCheckpointError or UnsupportedCheckpointError naming the checkpoint "
           "otherwise. The one reader of manifest.json (docs/design.md#the-checkpoint).")
      .def("digest", &ArchiveReader::digest)
      .def("entry_names", &ArchiveReader::entry_names)
      .def("entry_size", &ArchiveReader::entry_size, py::arg("name"))
      .def(
          "check_listed",
          [](const ArchiveReader& r, py::handle files) {
            ok_or_throw(r.check_listed(records_from_python(files)));
          },
          py::arg("files"))
      .def(
          "read",
          [](const ArchiveReader& r, const std::string& name, py::handle record) {
            const FileRecord expected = record_from_python(record);
            StatusOr<std::string_view> view = Status(StatusCode::kInternal, "not read");
            {
              py::gil_scoped_release no_gil;  // hashes the entry on first use
              view = r.read(name, expected);
            }
            const std::string_view data = value_or_throw(std::move(view));
            // Allocate under the GIL, copy without it.
            PyObject* bytes = PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(data.size()));
            if (bytes == nullptr) throw py::error_already_set();
            {
              py::gil_scoped_release no_gil;
              std::memcpy(PyBytes_AS_STRING(bytes), data.data(), data.size());
            }
            return py::reinterpret_steal<py::bytes>(bytes);
          },
          py::arg("name"), py::arg("record"))
      .def(
          "extract",
          [](const ArchiveReader& r, const std::string& name, py::handle record, py::handle dest) {
            const FileRecord expected = record_from_python(record);
            const std::string dest_path = fspath(dest);
            Status s;
            {
              py::gil_scoped_release no_gil;
              s = r.extract(name, expected, dest_path);
            }
            ok_or_throw(s);
          },
          py::arg("name"), py::arg("record"), py::arg("dest"))
      .def(
          "extract_all",
          [](const ArchiveReader& r, py::handle files, py::handle cache_root, bool verify_full) {
            const std::vector<FileRecord> records = records_from_python(files);
            const std::string root = fspath(cache_root);
            StatusOr<std::string> dir = Status(StatusCode::kInternal, "not extracted");
            {
              py::gil_scoped_release no_gil;  // may wait on another process's lock, hashes, writes
              dir = extract_all(r, records, root, verify_full);
            }
            return value_or_throw(std::move(dir));
          },
          py::arg("files"), py::arg("cache_root"), py::arg("verify_full") = false,
          "Extracts `files` into <cache_root>/<digest>/ once and returns that folder.");
}

// The checkpoint rules Python and the C++ runtime share, and the constants they read.
void register_checkpoint_rules(py::module_& m) {
  m.def(
      "check_json_nesting",
      [](const std::string& text, const std::string& what) {
        ok_or_throw(check_json_nesting(text, kMaxJsonNesting, what));
      },
      py::arg("text"), py::arg("what"),
      "CorruptCheckpointError when `text` nests arrays/objects deeper than the checkpoint limit (64).");
  m.def(
      "fingerprint_mismatches",
      [](py::handle saved, py::handle current, const std::vector<std::string>& requires_) {
        const auto found = fingerprint_mismatches(fingerprint_from_python(saved, "saved"),
                                                  fingerprint_from_python(current, "current"), requires_);
        py::list out;
        for (const FingerprintMismatch& f : found)
          out.append(py::make_tuple(f.field, optional_text(f.saved), optional_text(f.current)));
        return out;
      },
      py::arg("saved"), py::arg("current"), py::arg("requires"),
      "(field, saved, current) for every required fingerprint field that differs: the one rule the C++ "
      "runtime applies too (docs/reference/checkpoint.md#integrity-and-compatibility).");
  {
    py::dict names;
    for (const auto& [path, name] : legacy_backend_names()) names[py::str(path)] = name;
    // Format-1 backend class path -> stable backend name (checkpoint/backend_names.h).
    m.attr("LEGACY_BACKEND_NAMES") = names;
    py::list versions;
    for (int v = kManifestFormatMin; v <= kManifestFormatMax; ++v) versions.append(v);
    m.attr("MANIFEST_FORMAT_VERSIONS") = py::tuple(versions);
  }
  m.def(
      "is_safe_name", [](const std::string& name) { return is_safe_name(name); }, py::arg("name"),
      "True for a module or graph name that can be a folder name.");
}

}  // namespace

void register_checkpoint_bindings(py::module_& m) {
  register_manifest_bindings(m);
  register_archive_writer(m);
  register_archive_reader(m);
  register_checkpoint_rules(m);
}

}  // namespace aitune::python
