#include "reshard/layout/parse.h"

#include <gtest/gtest.h>

#include "layout/support/expect_error.h"

namespace reshard {
namespace {

TEST(ParseMeshAxes, Valid) {
  EXPECT_EQ(parse_mesh_axes("data=2,model=8"), (std::vector<MeshAxis>{{"data", 2}, {"model", 8}}));
  EXPECT_EQ(parse_mesh_axes(" x = 4 "), (std::vector<MeshAxis>{{"x", 4}}));
}

TEST(ParseMeshAxes, ErrorsNameTheBadPart) {
  EXPECT_TRUE(testing::throws_error([] { parse_mesh_axes(""); }, ErrorCode::kParse, {"mesh"}));
  EXPECT_TRUE(testing::throws_error([] { parse_mesh_axes("data"); }, ErrorCode::kParse, {"'data'", "no size"}));
  EXPECT_TRUE(testing::throws_error([] { parse_mesh_axes("=4"); }, ErrorCode::kParse, {"no name"}));
  EXPECT_TRUE(testing::throws_error([] { parse_mesh_axes("data=0"); }, ErrorCode::kParse, {"'data'", "size 0"}));
  EXPECT_TRUE(testing::throws_error([] { parse_mesh_axes("data=-2"); }, ErrorCode::kParse, {"'data'", "negative"}));
  EXPECT_TRUE(testing::throws_error([] { parse_mesh_axes("data=two"); }, ErrorCode::kParse, {"'two'"}));
  EXPECT_TRUE(testing::throws_error([] { parse_mesh_axes("data=2,,x=2"); }, ErrorCode::kParse));
  EXPECT_TRUE(testing::throws_error([] { parse_mesh_axes("data=99999999999999999999"); }, ErrorCode::kParse,
                                    {"too large"}));
  EXPECT_TRUE(testing::throws_error([] { parse_mesh_axes("data=2x"); }, ErrorCode::kParse, {"'2x'"}));
}

TEST(ParseMeshAxes, NamesMustBeWhatASpecCanName) {
  EXPECT_EQ(parse_mesh_axes("model-1=2,x.y=2,_z=2")[2].name, "_z");
  // A spec reads these as "not partitioned", so the axis could never be used.
  EXPECT_TRUE(testing::throws_error([] { parse_mesh_axes("None=4"); }, ErrorCode::kParse, {"'None'"}));
  EXPECT_TRUE(testing::throws_error([] { parse_mesh_axes("x=2,_=2"); }, ErrorCode::kParse, {"'_'"}));
  // And these it cannot write at all.
  EXPECT_TRUE(testing::throws_error([] { parse_mesh_axes("da ta=4"); }, ErrorCode::kParse, {"'da ta'"}));
  EXPECT_TRUE(testing::throws_error([] { parse_mesh_axes("(x)=4"); }, ErrorCode::kParse, {"'('"}));
  EXPECT_TRUE(testing::throws_error([] { parse_mesh_axes("'x'=4"); }, ErrorCode::kParse));
}

TEST(ParseDeviceList, ValidAndInvalid) {
  EXPECT_EQ(parse_device_list("0,4, 8 ,12"), (std::vector<DeviceId>{0, 4, 8, 12}));
  EXPECT_TRUE(testing::throws_error([] { parse_device_list(""); }, ErrorCode::kParse));
  EXPECT_TRUE(testing::throws_error([] { parse_device_list("0,x,2"); }, ErrorCode::kParse, {"position 1", "'x'"}));
  EXPECT_TRUE(testing::throws_error([] { parse_device_list("0,-1"); }, ErrorCode::kParse, {"'-1'"}));
  EXPECT_TRUE(testing::throws_error([] { parse_device_list("0,,1"); }, ErrorCode::kParse, {"position 1"}));
  EXPECT_TRUE(testing::throws_error([] { parse_device_list("1.5"); }, ErrorCode::kParse));
  EXPECT_TRUE(testing::throws_error([] { parse_device_list("+3"); }, ErrorCode::kParse));
}

TEST(ParseShape, ValidAndInvalid) {
  EXPECT_EQ(parse_shape("32,8,4096"), (Shape{32, 8, 4096}));
  EXPECT_EQ(parse_shape("0,3"), (Shape{0, 3}));
  EXPECT_EQ(parse_shape(""), Shape{});  // a scalar
  EXPECT_TRUE(testing::throws_error([] { parse_shape("8,-1"); }, ErrorCode::kParse, {"dimension 1"}));
  EXPECT_TRUE(testing::throws_error([] { parse_shape("8,a"); }, ErrorCode::kParse, {"dimension 1", "'a'"}));
  EXPECT_TRUE(testing::throws_error([] { parse_shape("8,"); }, ErrorCode::kParse, {"dimension 1"}));
  EXPECT_TRUE(testing::throws_error([] { parse_shape("99999999999999999999"); }, ErrorCode::kParse,
                                    {"too large"}));
}

TEST(ParseCount, Bounds) {
  EXPECT_EQ(parse_count("9223372036854775807", "n"), INT64_MAX);
  EXPECT_TRUE(testing::throws_error([] { parse_count("9223372036854775808", "n"); }, ErrorCode::kParse));
  EXPECT_TRUE(testing::throws_error([] { parse_count("", "thing"); }, ErrorCode::kParse, {"thing"}));
}

TEST(ParseByteSize, UnitsAndErrors) {
  EXPECT_EQ(parse_byte_size("1024"), 1024u);
  EXPECT_EQ(parse_byte_size("5GB"), 5000000000u);
  EXPECT_EQ(parse_byte_size("500MB"), 500000000u);
  EXPECT_EQ(parse_byte_size("1.5GiB"), 1610612736u);
  EXPECT_EQ(parse_byte_size("2 kib"), 2048u);
  EXPECT_EQ(parse_byte_size("7B"), 7u);
  EXPECT_TRUE(testing::throws_error([] { parse_byte_size("GB"); }, ErrorCode::kParse));
  EXPECT_TRUE(testing::throws_error([] { parse_byte_size("5XB"); }, ErrorCode::kParse, {"'XB'"}));
  EXPECT_TRUE(testing::throws_error([] { parse_byte_size("1.2.3GB"); }, ErrorCode::kParse));
  EXPECT_TRUE(testing::throws_error([] { parse_byte_size("100000000TB"); }, ErrorCode::kParse, {"too large"}));
}

}  // namespace
}  // namespace reshard
