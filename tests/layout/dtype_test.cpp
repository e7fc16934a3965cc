#include "reshard/layout/dtype.h"

#include <cctype>
#include <set>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "reshard/layout/error.h"
#include "layout/support/expect_error.h"

namespace reshard {
namespace {

// Every safetensors dtype with its bits, in the reference's enum order
// (as the safetensors format defines them).
struct Expected {
  std::string_view name;
  int bits;
};
constexpr Expected kExpected[] = {
    {"BOOL", 8},    {"F4", 4},          {"F6_E2M3", 6},     {"F6_E3M2", 6}, {"U8", 8},   {"I8", 8},
    {"F8_E5M2", 8}, {"F8_E4M3", 8},     {"F8_E8M0", 8},     {"F8_E4M3FNUZ", 8},          {"F8_E5M2FNUZ", 8},
    {"I16", 16},    {"U16", 16},        {"F16", 16},        {"BF16", 16},   {"I32", 32}, {"U32", 32},
    {"F32", 32},    {"C64", 64},        {"F64", 64},        {"I64", 64},    {"U64", 64},
};

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

TEST(DType, NamesAndBitsFollowTheEnumOrder) {
  ASSERT_EQ(std::size(kExpected), static_cast<size_t>(kNumDTypes));
  for (int i = 0; i < kNumDTypes; ++i) {
    const auto dtype = static_cast<DType>(i);
    EXPECT_EQ(dtype_name(dtype), kExpected[i].name) << i;
    EXPECT_EQ(dtype_bits(dtype), kExpected[i].bits) << kExpected[i].name;
  }
}

TEST(DType, ElementBytesAreWholeBytesAndZeroBelowAByte) {
  EXPECT_EQ(element_bytes(DType::kF32), 4u);
  EXPECT_EQ(element_bytes(DType::kBF16), 2u);
  EXPECT_EQ(element_bytes(DType::kF64), 8u);
  EXPECT_EQ(element_bytes(DType::kBool), 1u);
  for (int i = 0; i < kNumDTypes; ++i) {
    const auto dtype = static_cast<DType>(i);
    EXPECT_EQ(element_bytes(dtype), static_cast<size_t>(dtype_bits(dtype) / 8)) << dtype_name(dtype);
  }
}

TEST(DType, EnumeratorsSitAtTheirSafetensorsPositions) {
  EXPECT_EQ(static_cast<int>(DType::kBool), 0);
  EXPECT_EQ(static_cast<int>(DType::kF16), 13);
  EXPECT_EQ(static_cast<int>(DType::kBF16), 14);
  EXPECT_EQ(static_cast<int>(DType::kF32), 17);
  EXPECT_EQ(static_cast<int>(DType::kU64), 21);
}

TEST(DType, ParsesEveryNameInAnyCase) {
  for (int i = 0; i < kNumDTypes; ++i) {
    const auto dtype = static_cast<DType>(i);
    const std::string upper(dtype_name(dtype));
    std::string mixed = lower(upper);
    mixed[0] = upper[0];
    for (const std::string& text : {upper, lower(upper), mixed}) {
      ASSERT_TRUE(parse_dtype(text).has_value()) << text;
      EXPECT_EQ(*parse_dtype(text), dtype) << text;
      EXPECT_EQ(dtype_from_string(text), dtype) << text;
    }
  }
}

TEST(DType, RejectsUnknownNames) {
  for (std::string_view bad : {"", "F", "F33", "bfloat16", "float32", " F32", "F32 ", "F8E4M3", "BF16x"}) {
    EXPECT_FALSE(parse_dtype(bad).has_value()) << bad;
    const std::string quoted = fmt::format("'{}'", bad);
    EXPECT_TRUE(testing::throws_error([&] { dtype_from_string(bad); }, ErrorCode::kParse, {quoted}));
  }
}

TEST(DType, CastableAndFloatingClasses) {
  std::set<DType> castable;
  std::set<DType> integral;
  for (int i = 0; i < kNumDTypes; ++i) {
    const auto dtype = static_cast<DType>(i);
    if (is_castable_float(dtype)) castable.insert(dtype);
    if (!is_floating(dtype)) integral.insert(dtype);
  }
  EXPECT_EQ(castable, (std::set<DType>{DType::kF32, DType::kF16, DType::kBF16}));
  EXPECT_EQ(integral, (std::set<DType>{DType::kBool, DType::kU8, DType::kI8, DType::kI16, DType::kU16,
                                       DType::kI32, DType::kU32, DType::kI64, DType::kU64}));
}

TEST(DType, ByteSizes) {
  EXPECT_EQ(dtype_byte_size(DType::kF32, 0), 0u);
  EXPECT_EQ(dtype_byte_size(DType::kF32, 3), 12u);
  EXPECT_EQ(dtype_byte_size(DType::kBF16, 5), 10u);
  EXPECT_EQ(dtype_byte_size(DType::kBool, 7), 7u);
  EXPECT_EQ(dtype_byte_size(DType::kC64, 2), 16u);
  EXPECT_EQ(dtype_byte_size(DType::kF4, 2), 1u);
  EXPECT_EQ(dtype_byte_size(DType::kF6E2M3, 4), 3u);
}

TEST(DType, SubByteTypesMustFillWholeBytes) {
  for (auto [dtype, elements] : {std::pair{DType::kF4, 3}, {DType::kF6E3M2, 2}, {DType::kF6E2M3, 5}}) {
    EXPECT_TRUE(testing::throws_error([&] { dtype_byte_size(dtype, static_cast<uint64_t>(elements)); },
                                      ErrorCode::kInvalidArgument, {dtype_name(dtype)}));
  }
}

TEST(DType, ByteSizeOverflowIsAnError) {
  EXPECT_TRUE(testing::throws_error([] { dtype_byte_size(DType::kF64, uint64_t{1} << 62); },
                                    ErrorCode::kOverflow));
}

}  // namespace
}  // namespace reshard
