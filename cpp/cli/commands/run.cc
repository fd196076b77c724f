// `aitune run <ckpt>` (docs/reference/native.md#command-line): one call of a graph through the C++
// runtime on its stored sample 0 or an inputs file; --check compares with the stored reference
// output under the graph's precision-class tolerances (docs/reference/validation.md#numeric-comparison).
#include <ATen/ATen.h>

#include <iostream>
#include <optional>
#include <string>

#include "cli.h"
#include "runtime/safetensors_io.h"
#include "select/tolerance.h"
#include "validate/compare.h"

namespace aitune::cli {

int run(int argc, char** argv) {
  auto parsed =
      parse("run", argc, argv, {"--module", "--graph", "--inputs", "--outputs", "--device", "--cuda-graphs"},
            {"--check"});
  if (!parsed) return kExitUsage;
  const Args& a = *parsed;
  const auto device = parse_device(a);
  if (!device) return usage_error("run", "--device takes a CUDA index or 'cpu'");
  std::optional<bool> graphs;
  if (!parse_cuda_graphs(a, graphs))
    return usage_error("run",
                       "--cuda-graphs takes on, off or auto, got '" + a.values.at("--cuda-graphs") + "'");
  if (a.flags.count("--check") && a.values.count("--inputs"))
    return usage_error(
        "run",
        "--check compares with the stored sample's reference output; it cannot be combined with --inputs");
  auto rt = load_for_run(a, *device, graphs);
  if (!rt.ok()) return fail("run", rt.status());
  const aitune::ModuleHandle* module = nullptr;
  const aitune::GraphInfo* graph = nullptr;
  if (aitune::Status s = pick(**rt, a, &module, &graph); !s.ok()) return fail("run", s);
  if (aitune::Status s = check_device(a, *device, *graph); !s.ok()) return fail("run", s);
  aitune::Inputs inputs;
  std::optional<aitune::StoredSample> sample;
  if (a.values.count("--inputs")) {
    auto read = read_inputs_file(a.values.at("--inputs"));
    if (!read.ok()) return fail("run", read.status());
    inputs = std::move(read).value();
  } else {
    if (!graph->native)
      return fail("run", aitune::Status(aitune::StatusCode::kBackendUnavailable, graph->not_native_reason));
    auto s = module->sample(graph->name, 0);
    if (!s.ok()) return fail("run", s.status());
    sample = std::move(s).value();
    inputs = sample->inputs;
  }
  auto outputs = (a.values.count("--inputs") && !a.values.count("--graph"))
                     ? module->run(inputs)
                     : module->run_graph(graph->name, inputs);
  if (!outputs.ok()) return fail("run", outputs.status());
  for (const auto& [path, t] : outputs->items) {
    std::cout << path << ": " << t.scalar_type() << " " << t.sizes() << "\n";
  }
  if (a.values.count("--outputs")) {
    aitune::Status s = aitune::write_safetensors_file(a.values.at("--outputs"), outputs->items);
    if (!s.ok()) return fail("run", s);
  }
  if (!a.flags.count("--check")) return kExitOk;
  if (sample->reference.empty())
    return fail("run", aitune::not_found(
                           "The stored sample has no reference output; save with include_samples=True"));
  auto precision = aitune::precision_class_from_name(graph->precision_class);
  const aitune::PrecisionClass pc = precision.ok() ? *precision : aitune::PrecisionClass::kFp32;
  const aitune::NumericTolerance tol = aitune::default_tolerance(pc);
  bool all_pass = true;
  for (const auto& [path, reference] : sample->reference) {
    const at::Tensor* candidate = outputs->find(path);
    if (candidate == nullptr) {
      std::cerr << "aitune run: output '" << path << "' is missing from the native outputs\n";
      all_pass = false;
      continue;
    }
    // The band is on the leaf's scale as in Python's check (docs/reference/validation.md#metrics);
    // the noise bound needs the float32 reference, which a checkpoint does not hold.
    auto metrics = aitune::compare_tensors(*candidate, reference, tol.atol, tol.rtol,
                                           pc == aitune::PrecisionClass::kFp32, tol.max_rel_l2);
    if (!metrics.ok()) return fail("run", metrics.status());
    aitune::LeafMetrics leaf{metrics->max_abs_error,     metrics->max_rel_error, metrics->rel_l2_error,
                             metrics->mismatch_fraction, metrics->has_nan,       metrics->numel};
    const bool passes = aitune::leaf_passes(leaf, tol);
    std::cout << "check " << path << ": max_abs=" << leaf.max_abs_error << " rel_l2=" << leaf.rel_l2_error
              << " mismatched=" << leaf.mismatch_fraction * 100 << "% (" << aitune::precision_class_name(pc)
              << ") " << (passes ? "passed" : "FAILED") << " (decided by "
              << aitune::deciding_bound(leaf, tol) << ")\n";
    if (!passes) {
      std::cerr << "aitune run: " << aitune::numeric_failure_message(path, 0, leaf, tol, pc) << "\n";
      all_pass = false;
    }
  }
  return all_pass ? kExitOk : kExitNumeric;
}

}  // namespace aitune::cli
