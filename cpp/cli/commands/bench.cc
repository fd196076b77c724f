// `aitune bench` (docs/reference/native.md#command-line, docs/reference/measurement.md): measures one graph
// of a checkpoint through the C++ runtime, on the graph's stored sample (resized with --batch-size or
// --shape), on a safetensors file (--inputs) or on random inputs (--random), with a fixed number of calls or
// until the host times are stable (--stable-cv).
#include <ATen/ATen.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <iomanip>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "bridge/tensor_bridge.h"
#include "cli.h"
#include "measure/call_timer.h"
#include "measure/measure_loop.h"
#include "measure/stop_rules.h"

namespace aitune::cli {
namespace {

using json = nlohmann::json;

constexpr int kDefaultMaxIterations = 100;  // StableWindowMeasuringStopStrategy's max_samples

std::string dims_str(c10::IntArrayRef dims) {
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); ++i) out += (i ? ", " : "") + std::to_string(dims[i]);
  return out + "]";
}

// One `--shape PATH=D0xD1...`.
struct ShapeFlag {
  std::string text;  // as given
  std::string path;
  std::vector<int64_t> dims;
};

// Parses `text` into `out`; returns the usage error, empty when it parses.
std::string parse_shape_flag(const std::string& text, ShapeFlag& out) {
  const std::string error =
      "--shape expects PATH=D0xD1... with positive sizes (e.g. input_x=8x3x224x224), got '" + text + "'";
  const size_t eq = text.rfind('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) return error;
  out = ShapeFlag{text, text.substr(0, eq), {}};
  std::stringstream dims(text.substr(eq + 1));
  std::string dim;
  while (std::getline(dims, dim, 'x')) {
    if (dim.empty() || !std::all_of(dim.begin(), dim.end(), [](unsigned char c) { return std::isdigit(c); }))
      return error;
    if (dim.size() > 18 || std::stoll(dim) <= 0) return error;  // digits only: no exception, no overflow
    out.dims.push_back(std::stoll(dim));
  }
  if (text.back() == 'x') return error;
  return "";
}

std::optional<double> parse_double(const std::string& s) {
  try {
    size_t pos = 0;
    const double v = std::stod(s, &pos);
    if (pos != s.size() || !std::isfinite(v)) return std::nullopt;
    return v;
  } catch (...) {
    return std::nullopt;
  }
}

enum class Source { kStoredSample, kFile, kRandom };

const char* source_name(Source s) {
  switch (s) {
    case Source::kStoredSample: return "stored_sample";
    case Source::kFile: return "file";
    case Source::kRandom: return "random";
  }
  return "";
}

struct BenchOptions {
  int device = 0;
  std::optional<bool> cuda_graphs;
  int warmup = 10;
  int iterations = 20;
  std::optional<int> batch_size;
  std::vector<ShapeFlag> shapes;
  Source source = Source::kStoredSample;
  std::optional<double> stable_cv;
  int max_iterations = kDefaultMaxIterations;
};

// Validates the command line into `o`; returns the usage error, empty when it is valid.
std::string read_options(const Args& a, BenchOptions& o) {
  const auto device = parse_device(a);
  if (!device) return "--device takes a CUDA index or 'cpu', got '" + a.values.at("--device") + "'";
  o.device = *device;
  if (!parse_cuda_graphs(a, o.cuda_graphs))
    return "--cuda-graphs takes on, off or auto, got '" + a.values.at("--cuda-graphs") + "'";
  // An integer flag: absent -> `value` unchanged; present -> parsed and at least `min`.
  auto int_flag = [&](const char* name, int min, const char* expected, int& value) -> std::string {
    if (!a.values.count(name)) return "";
    const std::optional<int> v = parse_int(a.values.at(name));
    if (!v || *v < min) return std::string(name) + " takes " + expected + ", got '" + a.values.at(name) + "'";
    value = *v;
    return "";
  };
  int batch = 0;
  for (std::string e : {int_flag("--warmup", 0, "a non-negative integer", o.warmup),
                        int_flag("--iterations", 1, "a positive integer", o.iterations),
                        int_flag("--batch-size", 1, "a positive integer", batch),
                        int_flag("--max-iterations", 1, "a positive integer", o.max_iterations)}) {
    if (!e.empty()) return e;
  }
  if (batch > 0) o.batch_size = batch;
  if (a.values.count("--stable-cv")) {
    o.stable_cv = parse_double(a.values.at("--stable-cv"));
    if (!o.stable_cv || *o.stable_cv <= 0.0 || *o.stable_cv >= 1.0)
      return "--stable-cv takes a ratio R with 0 < R < 1 (0.10: 10 %), got '" + a.values.at("--stable-cv") +
             "'";
    if (o.max_iterations < o.iterations)
      return "--max-iterations must be at least the stable window, --iterations " +
             std::to_string(o.iterations) + ", got " + std::to_string(o.max_iterations);
  } else if (a.values.count("--max-iterations")) {
    return "--max-iterations bounds a --stable-cv run; it needs --stable-cv, got --max-iterations " +
           a.values.at("--max-iterations") + " alone";
  }
  const bool has_shape = a.lists.count("--shape") > 0;
  if (has_shape && o.batch_size)
    return "--shape and --batch-size are mutually exclusive (--shape sets the batch axes too), got "
           "--batch-size " +
           a.values.at("--batch-size") + " and --shape " + a.lists.at("--shape").front();
  if (a.values.count("--inputs") && a.flags.count("--random"))
    return "--inputs and --random are mutually exclusive: the inputs come from the file or are drawn at "
           "random, "
           "got --inputs " +
           a.values.at("--inputs") + " and --random";
  if (a.values.count("--inputs") && (has_shape || o.batch_size))
    return std::string(
               "--inputs measures the file's tensors at their own shapes; it cannot be combined with ") +
           (has_shape ? "--shape " + a.lists.at("--shape").front()
                      : "--batch-size " + a.values.at("--batch-size"));
  if (has_shape) {
    for (const std::string& text : a.lists.at("--shape")) {
      ShapeFlag flag;
      if (std::string e = parse_shape_flag(text, flag); !e.empty()) return e;
      o.shapes.push_back(std::move(flag));
    }
  }
  o.source = a.values.count("--inputs")  ? Source::kFile
             : a.flags.count("--random") ? Source::kRandom
                                         : Source::kStoredSample;
  return "";
}

// Resolves every --shape PATH to a tensor input of `graph` (as ModuleHandle::run resolves Inputs
// keys): input index -> dims. Usage errors (exit 2) for an unknown path, a constant or an input
// named twice; kProfileShape (exit 7) for a rank other than the graph's.
int resolve_shapes(const GraphInfo& graph, const std::string& module, const std::vector<ShapeFlag>& shapes,
                   std::map<size_t, const ShapeFlag*>& out) {
  for (const ShapeFlag& flag : shapes) {
    const std::optional<size_t> index = find_input_leaf(graph, flag.path);
    if (!index || !graph.inputs[*index].is_tensor) {
      std::string known;
      for (const LeafInfo& l : graph.inputs) {
        if (l.is_tensor) known += (known.empty() ? "" : ", ") + l.name + " (" + l.semantic_path + ")";
      }
      return usage_error("bench", "--shape " + flag.text + ": graph '" + graph.name + "' of module '" +
                                      module + "' has no tensor input '" + flag.path +
                                      "'; expected one of: " + known);
    }
    const LeafInfo& leaf = graph.inputs[*index];
    if (out.count(*index))
      return usage_error("bench", "--shape names input '" + leaf.semantic_path + "' (tensor '" + leaf.name +
                                      "') twice: " + out.at(*index)->text + " and " + flag.text);
    if (flag.dims.size() != leaf.shape.size())
      return fail("bench",
                  profile_shape_error("--shape " + flag.text + ": input '" + leaf.semantic_path +
                                      "' (tensor '" + leaf.name + "') of graph '" + graph.name +
                                      "' has rank " + std::to_string(leaf.shape.size()) + " (profile min " +
                                      dims_str(leaf.min_shape) + ", max " + dims_str(leaf.max_shape) +
                                      "), got " + std::to_string(flag.dims.size()) + " dims"));
    out[*index] = &flag;
  }
  return kExitOk;
}

// The shape to measure for `leaf`: the --shape given for it, else `base` with its batch axes set
// to --batch-size when given.
std::vector<int64_t> target_shape(const LeafInfo& leaf, std::vector<int64_t> base, const ShapeFlag* shape,
                                  const std::optional<int>& batch_size) {
  if (shape != nullptr) return shape->dims;
  for (size_t d = 0; batch_size && d < leaf.axis_kinds.size() && d < base.size(); ++d) {
    if (leaf.axis_kinds[d] == "batch") base[d] = *batch_size;
  }
  return base;
}

// `t` repeated or sliced along every axis whose size differs from `shape` (same rank), so the
// values stay those of the recorded sample.
at::Tensor resize_sample(const at::Tensor& t, const std::vector<int64_t>& shape) {
  at::Tensor out = t;
  for (int64_t d = 0; d < out.dim(); ++d) {
    const int64_t n = out.size(d), want = shape[d];
    if (n == want) continue;
    if (n == 0) {
      std::vector<int64_t> sizes = out.sizes().vec();
      sizes[d] = want;
      out = at::zeros(sizes, out.options());
      continue;
    }
    if (n < want) {
      std::vector<int64_t> reps(out.dim(), 1);
      reps[d] = (want + n - 1) / n;
      out = out.repeat(reps);
    }
    out = out.narrow(d, 0, want);
  }
  return out.contiguous();
}

// Makes one measured input of `shape` for `leaf` with `make`, refusing a size no tensor can have
// (the element count or the bytes overflow 64 bits: a recorded minimum of 2^48 in several axes)
// and turning an allocation the machine cannot make into a typed error instead of an exception
// with a backtrace (docs/reference/native.md#command-line, bench: InvalidArgument, exit 2).
template <typename Make>
StatusOr<at::Tensor> make_input(const LeafInfo& leaf, const std::string& graph,
                                const std::vector<int64_t>& shape, c10::ScalarType type, Make make) {
  const auto too_large = [&](const std::string& why) {
    return invalid_argument("bench input '" + leaf.name + "' (" + leaf.semantic_path + ") of graph '" +
                            graph + "' cannot be made at shape " + dims_str(shape) + ": " + why +
                            "; pass a smaller --shape or --batch-size, or --inputs");
  };
  uint64_t elements = 1;
  for (const int64_t d : shape) {
    if (d < 0) return too_large("a negative size");
    if (d != 0 && elements > static_cast<uint64_t>(INT64_MAX) / static_cast<uint64_t>(d))
      return too_large("it has more than 2^63 elements");
    elements *= static_cast<uint64_t>(d);
  }
  const uint64_t item = c10::elementSize(type);
  if (elements > static_cast<uint64_t>(INT64_MAX) / item) return too_large("it takes more than 2^63 bytes");
  try {
    return make();
  } catch (const c10::Error& e) {
    const std::string what = e.what_without_backtrace();
    return too_large(std::to_string(elements * item) + " bytes could not be allocated (" +
                     what.substr(0, what.find('\n')) + ")");
  }
}

// A random input for `leaf`: floats from randn; bool inputs, and integer inputs whose name or path
// says "mask", from [0, 2); other integers from [0, 100) (token ids, indices: small and valid for
// most vocabularies and tables).
StatusOr<at::Tensor> random_input(const LeafInfo& leaf, const std::vector<int64_t>& shape) {
  AITUNE_ASSIGN_OR_RETURN(c10::ScalarType type, dtype_from_name(leaf.dtype));
  if (at::isFloatingType(type)) return at::randn(shape, at::TensorOptions().dtype(at::kFloat)).to(type);
  if (at::isComplexType(type)) return at::randn(shape, at::TensorOptions().dtype(type));
  std::string name = leaf.name + " " + leaf.semantic_path;
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  const bool mask_like = type == at::kBool || name.find("mask") != std::string::npos;
  return at::randint(0, mask_like ? 2 : 100, shape, at::TensorOptions().dtype(at::kLong)).to(type);
}

// The tensors to measure when they do not come from an --inputs file: the stored sample (resized
// to --shape / --batch-size) or, with --random, seeded random values of those shapes. `sample`
// receives the stored sample when the checkpoint has one.
Status sample_inputs(const ModuleHandle& module, const GraphInfo& graph, const BenchOptions& o,
                     const std::map<size_t, const ShapeFlag*>& shapes, std::optional<StoredSample>& sample,
                     Inputs& inputs) {
  auto s = module.sample(graph.name, 0);
  // --random falls back to the profile minimum when the checkpoint holds no sample.
  if (!s.ok() && !(o.source == Source::kRandom && s.status().code() == StatusCode::kNotFound))
    return s.status();
  if (s.ok()) sample = std::move(s).value();
  if (o.source == Source::kRandom) at::manual_seed(0);  // the same inputs on every run
  for (size_t i = 0; i < graph.inputs.size(); ++i) {
    const LeafInfo& leaf = graph.inputs[i];
    if (!leaf.is_tensor) continue;
    const at::Tensor* stored = nullptr;
    if (sample && sample->inputs.count(leaf.name))
      stored = std::get_if<at::Tensor>(&sample->inputs.at(leaf.name));
    const std::vector<int64_t> base = stored ? stored->sizes().vec() : leaf.min_shape;
    const std::vector<int64_t> shape =
        target_shape(leaf, base, shapes.count(i) ? shapes.at(i) : nullptr, o.batch_size);
    if (o.source == Source::kRandom) {
      auto type = dtype_from_name(leaf.dtype);
      if (!type.ok()) return type.status();
      auto t = make_input(leaf, graph.name, shape, *type, [&] { return random_input(leaf, shape); });
      if (!t.ok()) return t.status();
      inputs[leaf.name] = *t;
    } else if (stored != nullptr) {
      auto t = make_input(leaf, graph.name, shape, stored->scalar_type(), [&]() -> StatusOr<at::Tensor> {
        return shape == base ? *stored : resize_sample(*stored, shape);
      });
      if (!t.ok()) return t.status();
      inputs[leaf.name] = *t;
    }
  }
  return Status::Ok();
}

// The measured tensors' shapes by tensor name (file keys in another form resolved as run resolves
// them), and the size of the first batch axis among them.
json measured_shapes(const GraphInfo& graph, const Inputs& inputs, std::optional<int64_t>& batch_axis_size) {
  json shapes_json = json::object();
  for (const auto& [key, value] : inputs) {
    const at::Tensor* t = std::get_if<at::Tensor>(&value);
    if (t == nullptr) continue;
    const std::optional<size_t> index = find_input_leaf(graph, key);
    const LeafInfo* leaf = index ? &graph.inputs[*index] : nullptr;
    shapes_json[leaf && !leaf->name.empty() ? leaf->name : key] = t->sizes().vec();
    for (size_t d = 0;
         leaf && !batch_axis_size && d < leaf->axis_kinds.size() && d < static_cast<size_t>(t->dim()); ++d) {
      if (leaf->axis_kinds[d] == "batch") batch_axis_size = t->size(d);
    }
  }
  return shapes_json;
}

// The batch size the throughput is per: --batch-size, else the stored sample's when its shapes
// are kept, else the size of the first batch axis, else the sample's.
int64_t measured_batch_size(const BenchOptions& o, const std::optional<StoredSample>& sample,
                            bool shapes_given, const std::optional<int64_t>& batch_axis_size) {
  if (o.batch_size) return *o.batch_size;
  if (o.source == Source::kStoredSample && !shapes_given && sample && sample->batch_size > 0)
    return sample->batch_size;
  if (batch_axis_size && *batch_axis_size > 0) return *batch_axis_size;
  if (sample && sample->batch_size > 0) return sample->batch_size;
  return 1;
}

// What one bench run measured, for the two report forms.
struct BenchReport {
  const ModuleHandle& module;
  const GraphInfo& graph;
  const BenchOptions& options;
  std::string device;
  json shapes;
  int64_t batch_size;
  std::optional<CudaGraphCounters> counters;
};

void print_json(const BenchReport& r, const BatchResult& result) {
  json j = json::parse(to_json(result));
  j["module"] = r.module.name();
  j["graph"] = r.graph.name;
  j["backend"] = r.graph.backend_name;
  j["device"] = r.device;
  j["inputs_source"] = source_name(r.options.source);
  j["shapes"] = r.shapes;
  j["stable_cv"] = r.options.stable_cv ? json(*r.options.stable_cv) : json();
  j["cuda_graphs"] = nullptr;
  if (const auto& counters = r.counters) {
    j["cuda_graphs"] = {{"hits", counters->hits},
                        {"misses", counters->misses},
                        {"captures", counters->captures},
                        {"evictions", counters->evictions},
                        {"capture_failures", counters->capture_failures},
                        {"direct_calls", counters->direct_calls},
                        {"in_graph_copies", counters->in_graph_copies}};
  }
  std::cout << j.dump() << "\n";
}

void print_text(const BenchReport& r, const BatchResult& result) {
  std::string shapes_line;
  for (const auto& [name, dims] : r.shapes.items()) {
    shapes_line +=
        (shapes_line.empty() ? "" : ", ") + name + " " + dims_str(dims.get<std::vector<int64_t>>());
  }
  const auto& h = result.host_latency_ms;
  std::cout << "module '" << r.module.name() << "' graph '" << r.graph.name << "' (" << r.graph.backend_name
            << ", " << r.device << "), batch size " << r.batch_size << "\n"
            << "inputs (" << source_name(r.options.source) << "): " << shapes_line << "\n"
            << std::fixed << std::setprecision(4) << "host latency ms: mean " << h.mean << ", median "
            << h.median << ", p90 " << h.p90 << ", p99 " << h.p99 << " (" << result.num_measured_calls
            << " calls after " << result.num_warmup_calls << " warmup)\n";
  if (result.device_time_ms) std::cout << "device time ms: median " << result.device_time_ms->median << "\n";
  std::cout << std::setprecision(2) << "throughput: " << result.throughput_per_s << " samples/s\n";
  if (const auto& counters = r.counters) {
    std::cout << "CUDA graphs: " << counters->hits << " hits, " << counters->misses << " misses, "
              << counters->captures << " captures, " << counters->evictions << " evictions, "
              << counters->capture_failures << " capture failures, " << counters->direct_calls
              << " direct calls, " << counters->in_graph_copies << " copies inside the graphs\n";
  } else {
    std::cout << "CUDA graphs: off\n";
  }
}

}  // namespace

int bench(int argc, char** argv) {
  auto parsed = parse("bench", argc, argv,
                      {"--module", "--graph", "--batch-size", "--warmup", "--iterations", "--device",
                       "--cuda-graphs", "--inputs", "--stable-cv", "--max-iterations"},
                      {"--json", "--random"}, {"--shape"});
  if (!parsed) return kExitUsage;
  const Args& a = *parsed;
  BenchOptions o;
  if (std::string e = read_options(a, o); !e.empty()) return usage_error("bench", e);
  MeasureStopRule rule = FixedStepsRule{o.iterations, o.warmup > 0 ? o.warmup : 1};
  if (o.stable_cv)
    rule = StableWindowRule{o.iterations, *o.stable_cv, o.warmup > 0 ? o.warmup : 1, o.max_iterations};
  if (Status s = validate_stop_rule(rule); !s.ok()) return usage_error("bench", s.message());

  auto rt = load_for_run(a, o.device, o.cuda_graphs);
  if (!rt.ok()) return fail("bench", rt.status());
  const ModuleHandle* module = nullptr;
  const GraphInfo* graph = nullptr;
  if (Status s = pick(**rt, a, &module, &graph); !s.ok()) return fail("bench", s);
  if (Status s = check_device(a, o.device, *graph); !s.ok()) return fail("bench", s);
  Inputs inputs;
  if (o.source == Source::kFile) {
    auto read = read_inputs_file(a.values.at("--inputs"));
    if (!read.ok()) return fail("bench", read.status());
    inputs = std::move(read).value();
    if (!a.values.count("--graph")) {  // the graph ModuleHandle::run would select for the file
      auto selected = module->select_graph(inputs);
      if (!selected.ok()) return fail("bench", selected.status());
      for (const GraphInfo& g : module->graphs()) {
        if (g.name == *selected) graph = &g;
      }
    }
  }
  if (!graph->native) return fail("bench", Status(StatusCode::kBackendUnavailable, graph->not_native_reason));
  std::map<size_t, const ShapeFlag*> shapes;
  if (int code = resolve_shapes(*graph, module->name(), o.shapes, shapes); code != kExitOk) return code;

  std::optional<StoredSample> sample;
  if (o.source != Source::kFile) {
    if (Status s = sample_inputs(*module, *graph, o, shapes, sample, inputs); !s.ok())
      return fail("bench", s);
  }
  std::optional<int64_t> batch_axis_size;
  json shapes_json = measured_shapes(*graph, inputs, batch_axis_size);
  const int64_t batch_size = measured_batch_size(o, sample, !shapes.empty(), batch_axis_size);

  std::optional<int> cuda;
  if (graph->device.rfind("cuda", 0) == 0 && o.device >= 0) cuda = o.device;
  // Moving the inputs once keeps host-to-device copies out of the measured calls.
  if (cuda) {
    for (auto& [name, v] : inputs) {
      if (auto* t = std::get_if<at::Tensor>(&v)) *t = t->to(c10::Device(c10::kCUDA, *cuda));
    }
  }
  auto result = measure_batch(batch_size, rule, [&](size_t) -> StatusOr<CallTiming> {
    auto timed = time_call(
        [&]() -> Status {
          auto out = module->run_graph(graph->name, inputs);
          return out.ok() ? Status::Ok() : out.status();
        },
        cuda);
    if (!timed.ok()) return timed.status();
    return CallTiming{timed->host_ns, timed->device_ms};
  });
  // An unstable --stable-cv run ends here too, with the docs/reference/errors.md message naming the CV.
  if (!result.ok()) return fail("bench", result.status());

  const std::string device = cuda ? "cuda:" + std::to_string(*cuda) : "cpu";
  const BenchReport report{*module,
                           *graph,
                           o,
                           device,
                           std::move(shapes_json),
                           batch_size,
                           module->cuda_graph_counters(graph->name)};
  if (a.flags.count("--json")) {
    print_json(report, *result);
  } else {
    print_text(report, *result);
  }
  return kExitOk;
}

}  // namespace aitune::cli
