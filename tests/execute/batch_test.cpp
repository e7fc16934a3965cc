// Whole models in one operation: hundreds of tensors move together, every byte checked.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "execute/support/llama_model.h"
#include "execute/support/rank_threads.h"
#include "execute/support/reference_arrays.h"
#include "reshard/execute/operations.h"
#include "reshard/layout/error.h"
#include "reshard/plan/planner.h"

namespace reshard {
namespace {

using testing::ModelTensor;

// 34 layers: 309 tensors, bf16 matrices and f32 norms (replicated), ~2.8 MB.
const std::vector<ModelTensor>& model() {
  static const std::vector<ModelTensor> tensors = testing::llama_shaped(34, 64, 128, 256);
  return tensors;
}

std::vector<ShardedArray> model_in(const Topology& topology, int process,
                                   NamedSharding (*layout)(const ModelTensor&, const Topology&)) {
  std::vector<ShardedArray> arrays;
  for (size_t i = 0; i < model().size(); ++i) {
    const ModelTensor& t = model()[i];
    arrays.push_back(testing::reference_array(t.shape, t.dtype, layout(t, topology), topology, process, i));
  }
  return arrays;
}

std::vector<NamedSharding> layouts(const Topology& topology,
                                   NamedSharding (*layout)(const ModelTensor&, const Topology&)) {
  std::vector<NamedSharding> out;
  for (const ModelTensor& t : model()) out.push_back(layout(t, topology));
  return out;
}

uint64_t planned_cross_process_bytes(const Topology& topology) {
  uint64_t bytes = 0;
  for (const ModelTensor& t : model()) {
    const PlanKey key{t.shape, t.dtype, testing::fsdp_layout(t, topology), testing::tensor_parallel_layout(t, topology),
                      topology};
    bytes += make_plan(key).stats().bytes_cross_process;
  }
  return bytes;
}

class ModelBatch : public ::testing::TestWithParam<int> {};

TEST_P(ModelBatch, MovesEveryTensorInOneExchangeAndBack) {
  ASSERT_GE(model().size(), 300u);
  const int processes = GetParam();
  const Topology topology = Topology::uniform(2 * processes, processes);
  InProcessGroup group(processes);
  testing::run_ranks(group, [&](Transport& t) {
    const std::vector<ShardedArray> fsdp = model_in(topology, t.rank(), testing::fsdp_layout);
    const std::vector<ShardedArray> tp =
        reshard_arrays(fsdp, layouts(topology, testing::tensor_parallel_layout), t);
    ASSERT_EQ(tp.size(), model().size());
    for (size_t i = 0; i < tp.size(); ++i) {
      EXPECT_EQ(tp[i].sharding(), testing::tensor_parallel_layout(model()[i], topology)) << model()[i].name;
      EXPECT_TRUE(testing::matches_reference(tp[i], i)) << model()[i].name;
    }
    const std::vector<ShardedArray> back = reshard_arrays(tp, layouts(topology, testing::fsdp_layout), t);
    for (size_t i = 0; i < back.size(); ++i) EXPECT_TRUE(testing::matches_reference(back[i], i)) << model()[i].name;
  });
  // What crossed is what the plans say (both ways move the same bytes here),
  // and the whole model, a few MB, went in one message per pair each way.
  uint64_t sent = 0, received = 0, messages = 0;
  for (int p = 0; p < processes; ++p) {
    sent += group.transport(p).counters().bytes_sent;
    received += group.transport(p).counters().bytes_received;
    messages += group.transport(p).counters().messages_sent;
  }
  const uint64_t forth = planned_cross_process_bytes(topology);
  EXPECT_EQ(received, sent);
  EXPECT_GE(sent, forth);
  EXPECT_LE(sent, 2 * forth);
  EXPECT_LE(messages, 2u * static_cast<uint64_t>(processes * (processes - 1)));
}

INSTANTIATE_TEST_SUITE_P(Processes, ModelBatch, ::testing::Values(1, 2, 4),
                         [](const auto& param_info) { return fmt::format("{}processes", param_info.param); });

TEST(ModelBatchErrors, MoreTargetsThanArraysIsAnError) {
  const Topology topology = Topology::uniform(2, 1);
  testing::run_ranks(1, [&](Transport& t) {
    const std::vector<ShardedArray> arrays = model_in(topology, 0, testing::fsdp_layout);
    std::vector<NamedSharding> targets = layouts(topology, testing::tensor_parallel_layout);
    targets.push_back(targets.front());
    try {
      reshard_arrays(arrays, targets, t);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    }
  });
}

TEST(ModelBatchErrors, ArraysAlreadyInPlaceComeBackShared) {
  const Topology topology = Topology::uniform(2, 1);
  testing::run_ranks(1, [&](Transport& t) {
    const std::vector<ShardedArray> arrays = model_in(topology, 0, testing::fsdp_layout);
    const std::vector<ShardedArray> same = reshard_arrays(arrays, layouts(topology, testing::fsdp_layout), t);
    for (size_t i = 0; i < arrays.size(); ++i) {
      EXPECT_TRUE(same[i].shards()[0].buffer.shares_memory_with(arrays[i].shards()[0].buffer));
    }
  });
}

}  // namespace
}  // namespace reshard
