// The steps of `reshard demo`, each collective over the job's processes:
// build the model, save it, restore it elsewhere, export, import, and check
// each result against the reference.
#pragma once

#include <chrono>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "demo/demo_log.h"
#include "demo/demo_model.h"
#include "reshard/execute/transport.h"
#include "reshard/layout/mesh.h"
#include "reshard/layout/topology.h"
#include "reshard/pipelines/named_array.h"

namespace reshard::demo {

// The checks --self-test-flip can corrupt (one bit, before comparing).
inline constexpr std::string_view kFlipSteps[] = {"restore", "adapter", "merged", "import"};

struct DemoOptions {
  ModelSizes sizes;
  std::vector<std::string> lora_modules = llama_module_names();
  std::string out;   // empty: a temporary folder, removed at the end
  bool json = false;
  std::string flip;  // one of kFlipSteps, or empty
};

// One process's view of the run.
struct DemoContext {
  const DemoModel& model;
  const DemoOptions& options;
  Transport& transport;
  DemoLog& log;
  std::filesystem::path dir;  // where the files go
  Topology topology;
  Mesh train_mesh;   // data=4,model=4 in the TPU slice's device order
  Mesh resume_mesh;  // data=2,model=8 in natural order

  // Whether this process corrupts the data of `check` before checking it.
  bool flips(std::string_view check) const { return options.flip == check && transport.rank() == 0; }
  // The framework tensors laid out on `mesh`, as restore targets.
  NamedSharding sharding(const FrameworkTensor& tensor, const Mesh& mesh) const;
};

// Seconds `body` takes on the slowest process (barriers around it).
template <typename Body>
double timed(Transport& transport, Body&& body) {
  transport.barrier();
  const auto start = std::chrono::steady_clock::now();
  body();
  transport.barrier();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// In order: the model built on the training mesh, saved, restored onto the
// resume mesh (demo_steps.cpp); exported as an adapter and as a merged model,
// the merged model imported onto the resume mesh and restored onto the
// training mesh (demo_export_steps.cpp). Each logs itself and checks its result.
std::vector<NamedArray> build_step(DemoContext& ctx);
void save_step(DemoContext& ctx, const std::vector<NamedArray>& arrays);
void restore_step(DemoContext& ctx);
void export_adapter_step(DemoContext& ctx);
void export_merged_step(DemoContext& ctx);
void import_step(DemoContext& ctx);
void restore_imported_step(DemoContext& ctx);

// Collective: `value` summed over the processes.
uint64_t sum_over_processes(Transport& transport, uint64_t value);

// Flips the lowest bit of the first element of `array`'s first shard.
void flip_first_bit(NamedArray& array);

// Checks arrays restored onto `mesh` against the reference (`merged`: the
// merged weights, as an import of the merged model gives).
CheckTally check_restored(DemoContext& ctx, std::vector<NamedArray>& restored, const Mesh& mesh, bool merged,
                          std::string_view flip);

// Rank 0's picture (to the log) of `tensor` laid out on `mesh`, when it is 1-D or 2-D.
void log_picture(DemoContext& ctx, const FrameworkTensor& tensor, const Mesh& mesh);

}  // namespace reshard::demo
