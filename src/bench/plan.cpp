// `reshard bench plan`: planning time per dimension beside a naive all-pairs planner.
#include <algorithm>
#include <ctime>
#include <functional>
#include <memory>
#include <iostream>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bench/bench_report.h"
#include "reshard/layout/error.h"
#include "reshard/plan/plan_cache.h"
#include "reshard/plan/planner.h"

namespace reshard::bench {
namespace {

// ---- The baseline: what planning looks like without per-dimension search ----

bool boxes_meet(const Box& a, const Box& b) {
  for (size_t d = 0; d < a.rank(); ++d) {
    if (std::max(a.origin()[d], b.origin()[d]) >= std::min(a.origin()[d] + a.shape()[d], b.origin()[d] + b.shape()[d])) {
      return false;
    }
  }
  return true;
}

// Every target shard intersected with every source shard; replicas of one
// source slice meet the target in the same box, so they are grouped by box,
// and each box's sender is picked by the same replica rule as make_plan.
std::vector<Transfer> naive_all_pairs_plan(const PlanKey& key) {
  const std::vector<Box> sources = key.src.index_domains(key.shape);
  const std::vector<Box> targets = key.dst.index_domains(key.shape);
  const std::vector<DeviceId>& src_ids = key.src.mesh().devices();
  std::vector<uint64_t> sent(static_cast<size_t>(key.topology.num_processes()), 0);
  std::vector<Transfer> transfers;
  for (size_t t = 0; t < targets.size(); ++t) {
    const DeviceId dst = key.dst.mesh().devices()[t];
    const int home = key.topology.process_of(dst);
    std::map<std::vector<int64_t>, std::pair<Box, std::vector<DeviceId>>> pieces;  // by origin
    for (size_t s = 0; s < sources.size(); ++s) {
      if (targets[t].empty() || !boxes_meet(targets[t], sources[s])) continue;
      Box common = targets[t].intersect(sources[s]);
      auto& piece = pieces[common.origin()];
      piece.first = std::move(common);
      piece.second.push_back(src_ids[s]);
    }
    for (auto& [origin, piece] : pieces) {
      std::vector<DeviceId>& holders = piece.second;
      std::sort(holders.begin(), holders.end());
      DeviceId src = -1;
      if (std::binary_search(holders.begin(), holders.end(), dst)) src = dst;
      for (DeviceId h : holders) {
        if (src < 0 && key.topology.process_of(h) == home) src = h;
      }
      if (src < 0) {
        for (DeviceId h : holders) {
          const auto p = static_cast<size_t>(key.topology.process_of(h));
          if (src < 0 || sent[p] < sent[static_cast<size_t>(key.topology.process_of(src))]) src = h;
        }
        sent[static_cast<size_t>(key.topology.process_of(src))] +=
            dtype_byte_size(key.dtype, static_cast<uint64_t>(piece.first.volume()));
      }
      transfers.push_back({src, dst, std::move(piece.first)});
    }
  }
  return transfers;
}

// ---- Workloads ----

NamedSharding sharding(std::vector<MeshAxis> axes, std::vector<DeviceId> devices, std::vector<SpecEntry> spec) {
  return NamedSharding(Mesh(std::move(axes), std::move(devices)), PartitionSpec(std::move(spec)));
}

std::vector<DeviceId> iota_devices(int64_t n) {
  std::vector<DeviceId> ids(static_cast<size_t>(n));
  std::iota(ids.begin(), ids.end(), DeviceId{0});
  return ids;
}

// A device order in which the last mesh axis is the slowest-changing id
// digit, as create_device_mesh can produce: mesh neighbours sit far apart.
std::vector<DeviceId> transposed_devices(const std::vector<MeshAxis>& axes) {
  int64_t n = 1;
  for (const MeshAxis& a : axes) n *= a.size;
  std::vector<DeviceId> ids(static_cast<size_t>(n));
  for (int64_t logical = 0; logical < n; ++logical) {
    int64_t rest = logical;
    int64_t id = 0;
    int64_t scale = 1;
    for (size_t a = axes.size(); a-- > 0;) {
      const int64_t coord = rest % axes[a].size;
      rest /= axes[a].size;
      id += coord * (n / scale / axes[a].size);
      scale *= axes[a].size;
    }
    ids[static_cast<size_t>(logical)] = id;
  }
  return ids;
}

// One bf16[8192, 8192] tensor: a 64x64 mesh in transposed order, split both
// ways, to a 32x128 mesh in id order with the dimensions swapped over the axes.
PlanKey one_tensor_4096() {
  const std::vector<MeshAxis> src_axes = {{"data", 64}, {"model", 64}};
  return PlanKey{{8192, 8192},
                 DType::kBF16,
                 sharding(src_axes, transposed_devices(src_axes), {{"data"}, {"model"}}),
                 sharding({{"data", 32}, {"model", 128}}, iota_devices(4096), {{"model"}, {"data"}}),
                 Topology::uniform(4096, 512)};
}

// A Llama-7B-shaped model with LoRA adapters and Adam moments: 32 layers of
// 31 tensors plus 8 others, 1000 in all, from a training layout (3-D mesh
// data x fsdp x tensor, transposed device order) to a 2-D fsdp x tensor
// layout in id order, 256 devices in 32 processes of 8.
std::vector<PlanKey> llama_like_model() {
  const std::vector<MeshAxis> train_axes = {{"data", 2}, {"fsdp", 16}, {"tensor", 8}};
  const Mesh train(train_axes, transposed_devices(train_axes));
  const Mesh serve({{"fsdp", 32}, {"tensor", 8}}, iota_devices(256));
  const Topology job = Topology::uniform(256, 32);
  const std::vector<SpecEntry> rows_cols = {{"fsdp"}, {"tensor"}};
  const std::vector<SpecEntry> cols_rows = {{"tensor"}, {"fsdp"}};
  const std::vector<SpecEntry> rows = {{"fsdp"}};
  const std::vector<SpecEntry> cols = {{}, {"tensor"}};
  const std::vector<SpecEntry> replicated = {};
  std::vector<PlanKey> keys;
  const auto add = [&](Shape shape, const std::vector<SpecEntry>& from, const std::vector<SpecEntry>& to, int copies) {
    for (int i = 0; i < copies; ++i) {
      keys.push_back(PlanKey{shape, DType::kBF16, NamedSharding(train, PartitionSpec(from)),
                             NamedSharding(serve, PartitionSpec(to)), job});
    }
  };
  constexpr int64_t kHidden = 4096, kMlp = 11008, kVocab = 32000, kRank = 16;
  for (int layer = 0; layer < 32; ++layer) {
    add({kHidden, kHidden}, rows_cols, rows_cols, 3);  // q, k, v
    add({kHidden, kHidden}, cols_rows, rows_cols, 1);  // o: split the other way round in training
    add({kMlp, kHidden}, rows_cols, rows_cols, 2);     // gate, up
    add({kHidden, kMlp}, cols_rows, rows_cols, 1);     // down
    add({kHidden}, replicated, replicated, 2);         // the two norms
    add({kRank, kHidden}, cols, cols, 4);              // LoRA A of q, k, v, gate
    add({kRank, kMlp}, cols, cols, 1);                 // LoRA A of down
    add({kRank, kHidden}, cols, cols, 2);              // LoRA A of o, up
    add({kHidden, kRank}, rows, rows, 5);              // LoRA B of q, k, v, o, down
    add({kMlp, kRank}, rows, rows, 2);                 // LoRA B of gate, up
    add({kRank, kHidden}, cols, cols, 4);              // Adam mu, nu of LoRA A of q, v
    add({kHidden, kRank}, rows, rows, 4);              // Adam mu, nu of LoRA B of q, v
  }
  add({kVocab, kHidden}, rows_cols, rows_cols, 1);  // embedding
  add({kHidden}, replicated, replicated, 1);        // final norm
  add({kVocab, kHidden}, cols_rows, rows_cols, 1);  // lm_head
  add({kRank, kHidden}, cols, cols, 3);             // lm_head LoRA A, its Adam mu and nu
  add({kVocab, kRank}, rows, rows, 1);              // lm_head LoRA B
  add({kHidden, 128}, replicated, replicated, 1);   // rotary table
  return keys;
}

// ---- Timing ----

double thread_cpu_ms() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) * 1e3 + static_cast<double>(now.tv_nsec) / 1e6;
}

// CPU time of this thread: planning is single-threaded and does no I/O, so
// on an idle machine this is the wall time, and on a busy one it is not
// inflated by waiting for a core.
double elapsed_ms(const std::function<void()>& work) {
  const double start = thread_cpu_ms();
  work();
  return thread_cpu_ms() - start;
}

// The naive planner fetches per target device, as the per-device plan does:
// the two must agree, or the comparison means nothing. Returns the
// transfers of the default plans (stage 0 and 1), made as one batch.
size_t check_agreement(const std::vector<PlanKey>& keys) {
  for (const PlanKey& key : keys) {
    if (make_plan(key, PlanOptions{false, false}).transfers() != naive_all_pairs_plan(key)) {
      throw Error(ErrorCode::kInvalidPlan, "bench plan: the naive and per-dimension planners disagree on " +
                                               key.dst.to_string());
    }
  }
  size_t transfers = 0;
  for (const Plan& plan : make_plans(keys)) transfers += plan.transfers().size();
  return transfers;
}

struct Timings {
  double fresh_ms = 0;
  double per_device_ms = 0;
  double naive_ms = 0;
  double cached_ms = 0;
};

// Times `plan_all` over every key; what it returns is freed after the clock
// stops, since freeing a plan is not planning.
template <typename PlanAll>
double median_ms(int runs, PlanAll&& plan_all) {
  std::vector<double> times;
  for (int i = 0; i < runs; ++i) {
    decltype(plan_all()) plans;
    times.push_back(elapsed_ms([&] { plans = plan_all(); }));
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

Timings time_planners(const std::vector<PlanKey>& keys, int fresh_runs, int naive_runs) {
  Timings t;
  // The default planner, all arrays as one operation (senders balanced over them).
  t.fresh_ms = median_ms(fresh_runs, [&] { return make_plans(keys); });
  // Each target device fetching its own pieces: what the two stages replace.
  t.per_device_ms = median_ms(fresh_runs, [&] { return make_plans(keys, PlanOptions{false, false}); });
  t.naive_ms = median_ms(naive_runs, [&] {
    std::vector<std::vector<Transfer>> plans;
    plans.reserve(keys.size());
    for (const PlanKey& key : keys) plans.push_back(naive_all_pairs_plan(key));
    return plans;
  });
  PlanCache cache(keys.size());
  for (const PlanKey& key : keys) cache.get(key);
  t.cached_ms = median_ms(fresh_runs, [&] {
    std::vector<std::shared_ptr<const Plan>> plans;
    plans.reserve(keys.size());
    for (const PlanKey& key : keys) plans.push_back(cache.get(key));
    return plans;
  });
  return t;
}

}  // namespace

BenchReport run_plan_benchmark() {
  BenchReport report{"plan", {}};
  std::cerr << "  times: the planning thread's CPU time, median of several runs\n";
  const std::vector<PlanKey> one = {one_tensor_4096()};
  const size_t one_transfers = check_agreement(one);
  const Timings single = time_planners(one, 21, 3);
  std::cerr << fmt::format("  1 tensor, 4096 -> 4096 devices: {} transfers\n", one_transfers);
  report.figures.push_back(time_figure("plan 1 tensor, 4096 -> 4096 devices", single.fresh_ms,
                                       "naive all-pairs planner", single.naive_ms, 2.0));
  report.figures.push_back(time_figure("two-stage plan, 1 tensor, 4096 devices", single.fresh_ms,
                                       "per-device plan", single.per_device_ms, std::nullopt));
  report.figures.push_back(time_figure("cached plan, 1 tensor, 4096 devices", single.cached_ms,
                                       "fresh plan (per dimension)", single.fresh_ms, std::nullopt));

  const std::vector<PlanKey> model = llama_like_model();
  const size_t model_transfers = check_agreement(model);
  const Timings whole = time_planners(model, 7, 3);
  std::cerr << fmt::format("  {} tensors, 256 devices in 32 processes: {} transfers\n", model.size(), model_transfers);
  report.figures.push_back(time_figure(fmt::format("plan {} tensors (Llama-like), 256 devices", model.size()),
                                       whole.fresh_ms, "naive all-pairs planner", whole.naive_ms, 50.0));
  report.figures.push_back(time_figure(fmt::format("two-stage plans, {} tensors", model.size()), whole.fresh_ms,
                                       "per-device plans", whole.per_device_ms, std::nullopt));
  report.figures.push_back(time_figure(fmt::format("cached plans, {} tensors", model.size()), whole.cached_ms,
                                       "fresh plans (per dimension)", whole.fresh_ms, std::nullopt));
  return report;
}

}  // namespace reshard::bench
