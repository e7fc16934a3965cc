#include "reshard/layout/mesh.h"

#include <gtest/gtest.h>

#include "layout/support/expect_error.h"

namespace reshard {
namespace {

const std::vector<DeviceId> kPermuted = {0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15};

TEST(Mesh, DefaultOrderAndLookups) {
  const Mesh mesh = Mesh::with_default_order({{"data", 2}, {"model", 3}});
  EXPECT_EQ(mesh.size(), 6);
  EXPECT_EQ(mesh.num_axes(), 2u);
  EXPECT_EQ(mesh.devices(), (std::vector<DeviceId>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(mesh.axis_index("model"), 1u);
  EXPECT_FALSE(mesh.axis_index("x").has_value());
  EXPECT_EQ(mesh.axis_size(1), 3);
  EXPECT_EQ(mesh.to_string(), "Mesh('data': 2, 'model': 3)");
}

TEST(Mesh, CoordinatesAreRowMajor) {
  const Mesh mesh = Mesh::with_default_order({{"a", 2}, {"b", 3}, {"c", 4}});
  int64_t logical = 0;
  for (int64_t a = 0; a < 2; ++a) {
    for (int64_t b = 0; b < 3; ++b) {
      for (int64_t c = 0; c < 4; ++c) {
        EXPECT_EQ(mesh.coordinates(logical++), (std::vector<int64_t>{a, b, c}));
      }
    }
  }
}

TEST(Mesh, DeviceOrderIsPartOfTheMesh) {
  const Mesh permuted({{"data", 4}, {"model", 4}}, kPermuted);
  const Mesh plain = Mesh::with_default_order({{"data", 4}, {"model", 4}});
  EXPECT_NE(permuted, plain);
  EXPECT_EQ(permuted.logical_index_of(4), 1);
  EXPECT_EQ(permuted.logical_index_of(15), 15);
  EXPECT_EQ(permuted.logical_index_of(1), 4);
  EXPECT_FALSE(permuted.logical_index_of(16).has_value());
  EXPECT_EQ(permuted.to_string(),
            "Mesh('data': 4, 'model': 4, devices=[0,4,8,12,1,5,9,13,2,6,10,14,3,7,11,15])");
}

TEST(Mesh, ValidationErrorsNameTheProblem) {
  EXPECT_TRUE(testing::throws_error([] { Mesh({{"x", 2}, {"x", 2}}, {0, 1, 2, 3}); }, ErrorCode::kInvalidMesh,
                                    {"'x'", "twice"}));
  EXPECT_TRUE(testing::throws_error([] { Mesh({{"", 2}}, {0, 1}); }, ErrorCode::kInvalidMesh, {"empty name"}));
  EXPECT_TRUE(testing::throws_error([] { Mesh({{"x", 0}}, {}); }, ErrorCode::kInvalidMesh, {"'x'", "size 0"}));
  EXPECT_TRUE(testing::throws_error([] { Mesh({{"x", -2}}, {0, 1}); }, ErrorCode::kInvalidMesh, {"-2"}));
  EXPECT_TRUE(testing::throws_error([] { Mesh({{"x", 2}, {"y", 2}}, {0, 1, 2}); }, ErrorCode::kInvalidMesh,
                                    {"x=2,y=2", "need 4", "3 were given"}));
  EXPECT_TRUE(testing::throws_error([] { Mesh({{"x", 4}}, {0, 1, 1, 2}); }, ErrorCode::kInvalidMesh,
                                    {"device 1 appears twice"}));
  EXPECT_TRUE(testing::throws_error([] { Mesh({{"x", 2}}, {0, -3}); }, ErrorCode::kInvalidMesh, {"-3"}));
  EXPECT_TRUE(testing::throws_error([] { Mesh({{"x", int64_t{1} << 40}, {"y", int64_t{1} << 40}}, {0}); },
                                    ErrorCode::kOverflow));
  EXPECT_TRUE(testing::throws_error([] { Mesh::with_default_order({{"x", 2}, {"x", 3}}); },
                                    ErrorCode::kInvalidMesh, {"'x'"}));
}

TEST(Mesh, AMeshWithoutAxesHasOneDevice) {
  const Mesh mesh({}, {7});
  EXPECT_EQ(mesh.size(), 1);
  EXPECT_TRUE(mesh.coordinates(0).empty());
}

TEST(Mesh, DeviceIdsNeedNotBeDense) {
  const Mesh mesh({{"x", 3}}, {10, 2, 40});
  EXPECT_EQ(mesh.logical_index_of(40), 2);
  EXPECT_EQ(mesh.devices(), (std::vector<DeviceId>{10, 2, 40}));
}

}  // namespace
}  // namespace reshard
