// A Llama-shaped model (309 tensors, mixed dtypes, norms replicated) moved between two layouts in one
// operation across real processes; every rank checks every byte of its tensors, and the transport's
// counted bytes match the plans.
#include <cstring>

#include <gtest/gtest.h>

#include "execute/support/llama_model.h"
#include "execute/support/reference_arrays.h"
#include "mpi_world.h"
#include "reshard/execute/operations.h"
#include "reshard/plan/plan_cache.h"
#include "reshard/plan/planner.h"

namespace reshard {
namespace {

using testing::ModelTensor;

class ModelBatchMpi : public testing::MpiTest {
 protected:
  Transport& t_ = testing::world_transport();
  const Topology topology_ = Topology::uniform(2 * t_.size(), t_.size());
  const std::vector<ModelTensor> model_ = testing::llama_shaped(34, 64, 128, 256);
};

TEST_F(ModelBatchMpi, MovesEveryTensorInOneExchangeAndBack) {
  ASSERT_GE(model_.size(), 300u);
  std::vector<ShardedArray> fsdp;
  std::vector<NamedSharding> tp_layouts, fsdp_layouts;
  uint64_t planned = 0;
  for (size_t i = 0; i < model_.size(); ++i) {
    const ModelTensor& m = model_[i];
    fsdp_layouts.push_back(testing::fsdp_layout(m, topology_));
    tp_layouts.push_back(testing::tensor_parallel_layout(m, topology_));
    fsdp.push_back(testing::reference_array(m.shape, m.dtype, fsdp_layouts.back(), topology_, t_.rank(), i));
    const PlanKey key{m.shape, m.dtype, fsdp_layouts.back(), tp_layouts.back(), topology_};
    planned += default_plan_cache().get(key)->stats().bytes_cross_process;
  }
  const TransportCounters before = t_.counters();
  const std::vector<ShardedArray> tp = reshard_arrays(fsdp, tp_layouts, t_);
  const TransportCounters after = t_.counters();
  ASSERT_EQ(tp.size(), model_.size());
  for (size_t i = 0; i < tp.size(); ++i) EXPECT_TRUE(testing::matches_reference(tp[i], i)) << model_[i].name;
  EXPECT_EQ(testing::sum_over_ranks(t_, after.bytes_sent - before.bytes_sent), planned);
  EXPECT_EQ(testing::sum_over_ranks(t_, after.bytes_received - before.bytes_received), planned);
  // A few MB in all: one message to each other process, for all 309 tensors.
  EXPECT_LE(after.messages_sent - before.messages_sent, static_cast<uint64_t>(t_.size() - 1));
  const std::vector<ShardedArray> back = reshard_arrays(tp, fsdp_layouts, t_);
  for (size_t i = 0; i < back.size(); ++i) EXPECT_TRUE(testing::matches_reference(back[i], i)) << model_[i].name;
}

TEST_F(ModelBatchMpi, GathersTheWholeModelOnEveryHost) {
  std::vector<ShardedArray> tp;
  for (size_t i = 0; i < model_.size(); ++i) {
    const ModelTensor& m = model_[i];
    tp.push_back(testing::reference_array(m.shape, m.dtype, testing::tensor_parallel_layout(m, topology_), topology_,
                                          t_.rank(), i));
  }
  const std::vector<HostArray> hosts = to_host(tp, t_);
  ASSERT_EQ(hosts.size(), model_.size());
  for (size_t i = 0; i < hosts.size(); ++i) {
    const std::vector<std::byte> expected = testing::reference_host_bytes(model_[i].shape, model_[i].dtype, i);
    const auto actual = hosts[i].buffer.bytes();
    EXPECT_TRUE(std::equal(expected.begin(), expected.end(), actual.begin(), actual.end())) << model_[i].name;
  }
}

}  // namespace
}  // namespace reshard
