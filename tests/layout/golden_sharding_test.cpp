// Every case of golden/jax_sharding.json through the library.
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "reshard/layout/error.h"
#include "reshard/layout/sharding.h"
#include "layout/support/printers.h"
#include "support/golden_sharding.h"

namespace reshard {
namespace {

using testing::GoldenCase;

NamedSharding sharding_of(const GoldenCase& c, const PartitionSpec& spec) {
  std::vector<MeshAxis> axes;
  for (const auto& [name, size] : c.axes) axes.push_back({name, size});
  return NamedSharding(Mesh(std::move(axes), c.devices), spec, MemoryKind::kDevice, c.uneven);
}

class GoldenSharding : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(GoldenSharding, MatchesJax) {
  const GoldenCase& c = GetParam();
  const NamedSharding s = sharding_of(c, PartitionSpec(c.spec));
  if (!c.error.empty()) {
    try {
      s.index_domains(c.shape);
      FAIL() << "expected a " << c.error << " error";
    } catch (const Error& e) {
      EXPECT_EQ(error_code_name(e.code()), c.error) << e.what();
    }
    return;
  }
  const std::vector<Box> boxes = s.index_domains(c.shape);
  const std::vector<int64_t> replicas = s.replica_ids(c.shape);
  ASSERT_EQ(boxes.size(), c.expected.size());
  for (size_t i = 0; i < boxes.size(); ++i) {
    const testing::GoldenDevice& want = c.expected[i];
    EXPECT_EQ(s.mesh().devices()[i], want.id) << "logical device " << i;
    ASSERT_EQ(boxes[i].rank(), want.index.size());
    for (size_t d = 0; d < want.index.size(); ++d) {
      EXPECT_EQ(boxes[i].interval(d), (Interval{want.index[d].first, want.index[d].second}))
          << "device " << want.id << " dimension " << d;
    }
    EXPECT_EQ(replicas[i], want.replica) << "device " << want.id;
  }
  if (c.uneven) {
    EXPECT_FALSE(s.shard_shape(c.shape).has_value());
  } else {
    ASSERT_TRUE(c.shard_shape.has_value());
    EXPECT_EQ(s.shard_shape(c.shape), *c.shard_shape);
  }
}

// The same spec written in either text syntax parses to the case's spec.
TEST_P(GoldenSharding, SpecTextParsesToTheSameSpec) {
  const GoldenCase& c = GetParam();
  EXPECT_EQ(PartitionSpec::parse(c.spec_flag()).entries(), c.spec) << c.spec_flag();
  EXPECT_EQ(PartitionSpec::parse(c.spec_jax()).entries(), c.spec) << c.spec_jax();
  EXPECT_EQ(PartitionSpec::parse(PartitionSpec(c.spec).to_string()).entries(), c.spec);
}

std::string case_name(const ::testing::TestParamInfo<GoldenCase>& param) { return param.param.name; }

INSTANTIATE_TEST_SUITE_P(Cases, GoldenSharding, ::testing::ValuesIn(testing::golden_sharding_cases()), case_name);

TEST(GoldenShardingFile, HasEvenUnevenAndEveryErrorClass) {
  std::set<std::string> errors;
  bool uneven = false;
  for (const GoldenCase& c : testing::golden_sharding_cases()) {
    if (!c.error.empty()) errors.insert(c.error);
    uneven |= c.uneven;
  }
  EXPECT_TRUE(uneven);
  for (const char* name : {"indivisible", "duplicate_axis", "unknown_axis", "rank"}) {
    EXPECT_TRUE(errors.count(name)) << name;
  }
}

}  // namespace
}  // namespace reshard
