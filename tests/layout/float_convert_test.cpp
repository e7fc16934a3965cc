// f32 <-> f16 <-> bf16, checked against an independent reference written with
// double arithmetic and std::nearbyint (round to nearest, ties to even).
#include "layout/float_convert.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "layout/support/expect_error.h"
#include "support/seed.h"

namespace reshard {

using layout_detail::bf16_to_f32;
using layout_detail::convert_floats;
using layout_detail::f16_to_f32;
using layout_detail::f32_to_bf16;
using layout_detail::f32_to_f16;

namespace {

// A binary floating format of 16 bits: sign, exponent_bits, mantissa_bits.
struct Format {
  const char* name;
  int exponent_bits;
  int mantissa_bits;
  int bias() const { return (1 << (exponent_bits - 1)) - 1; }
  uint16_t exponent_mask() const { return static_cast<uint16_t>(((1u << exponent_bits) - 1u) << mantissa_bits); }
  uint16_t mantissa_mask() const { return static_cast<uint16_t>((1u << mantissa_bits) - 1u); }
  uint16_t quiet_bit() const { return static_cast<uint16_t>(1u << (mantissa_bits - 1)); }
  bool is_nan(uint16_t bits) const {
    return (bits & exponent_mask()) == exponent_mask() && (bits & mantissa_mask()) != 0;
  }
  double max_finite() const { return std::ldexp(2.0 - std::ldexp(1.0, -mantissa_bits), bias()); }
};
constexpr Format kF16{"f16", 5, 10};
constexpr Format kBF16{"bf16", 8, 7};

bool sign_of(uint16_t bits) { return (bits & 0x8000u) != 0; }

// The value a non-NaN bit pattern stands for, from the IEEE definition.
double decode(const Format& f, uint16_t bits) {
  const int exponent = (bits & f.exponent_mask()) >> f.mantissa_bits;
  const int mantissa = bits & f.mantissa_mask();
  double magnitude = 0;
  if ((bits & f.exponent_mask()) == f.exponent_mask()) {
    magnitude = std::numeric_limits<double>::infinity();
  } else if (exponent == 0) {
    magnitude = std::ldexp(mantissa, 1 - f.bias() - f.mantissa_bits);
  } else {
    magnitude = std::ldexp(mantissa + (1 << f.mantissa_bits), exponent - f.bias() - f.mantissa_bits);
  }
  return sign_of(bits) ? -magnitude : magnitude;
}

// x rounded to the format, ties to even; infinity past the largest finite value.
double reference_round(const Format& f, float x) {
  if (x == 0 || std::isinf(x)) return x;
  int e = 0;
  std::frexp(static_cast<double>(x), &e);  // |x| in [2^(e-1), 2^e)
  const int exponent = std::max(e - 1, 1 - f.bias());
  const double quantum = std::ldexp(1.0, exponent - f.mantissa_bits);
  const double rounded = std::nearbyint(static_cast<double>(x) / quantum) * quantum;
  if (std::fabs(rounded) > f.max_finite()) return std::copysign(std::numeric_limits<double>::infinity(), x);
  return std::copysign(rounded, x);  // keeps the sign of a result rounded to zero
}

uint16_t to_format(const Format& f, float x) { return &f == &kF16 ? f32_to_f16(x) : f32_to_bf16(x); }
float from_format(const Format& f, uint16_t h) { return &f == &kF16 ? f16_to_f32(h) : bf16_to_f32(h); }

// Checks one f32 -> 16-bit conversion against the reference.
void check_narrowing(const Format& f, float x) {
  const uint16_t got = to_format(f, x);
  const uint32_t x_bits = std::bit_cast<uint32_t>(x);
  if (std::isnan(x)) {
    ASSERT_TRUE(f.is_nan(got)) << f.name << " of NaN 0x" << std::hex << x_bits << " gave 0x" << got;
    ASSERT_TRUE(got & f.quiet_bit()) << f.name << ": NaN 0x" << std::hex << x_bits << " not quiet: 0x" << got;
    ASSERT_EQ(sign_of(got), std::signbit(x)) << f.name << ": NaN 0x" << std::hex << x_bits << " lost its sign";
    // The payload's leading bits survive (as hardware conversions keep them).
    const int dropped = 23 - f.mantissa_bits;
    const uint32_t payload_mask = f.mantissa_mask() & ~f.quiet_bit();
    ASSERT_EQ(got & payload_mask, (x_bits >> dropped) & payload_mask) << f.name << std::hex << " 0x" << x_bits;
    return;
  }
  const double want = reference_round(f, x);
  ASSERT_EQ(decode(f, got), want) << f.name << " of " << std::hexfloat << x << " (0x" << std::hex << x_bits
                                  << ") gave 0x" << got;
  ASSERT_EQ(sign_of(got), std::signbit(want)) << f.name << " of " << std::hexfloat << x;
}

TEST(FloatConvert, ReferenceRoundsTiesToEven) {
  // A check of the test's own reference on hand-made cases.
  EXPECT_EQ(reference_round(kF16, 1.0f + 0x1p-11f), 1.0);                  // tie, down to even
  EXPECT_EQ(reference_round(kF16, 1.0f + 3 * 0x1p-11f), 1.0 + 0x1p-9);    // tie, up to even
  EXPECT_EQ(reference_round(kF16, 65519.0f), 65504.0);
  EXPECT_TRUE(std::isinf(reference_round(kF16, 65520.0f)));
  EXPECT_EQ(reference_round(kF16, 0x1p-25f), 0.0);                         // tie with zero
  EXPECT_EQ(reference_round(kF16, 0x1.000002p-25f), 0x1p-24);
  EXPECT_EQ(reference_round(kBF16, 1.0f + 0x1p-8f), 1.0);
  EXPECT_EQ(reference_round(kBF16, 1.0f + 3 * 0x1p-8f), 1.0 + 0x1p-6);
}

TEST(FloatConvert, Float16ToFloat32IsExactForAll65536Values) {
  for (uint32_t i = 0; i < 65536; ++i) {
    const auto h = static_cast<uint16_t>(i);
    const float x = f16_to_f32(h);
    if (kF16.is_nan(h)) {
      ASSERT_TRUE(std::isnan(x)) << std::hex << h;
      ASSERT_EQ(std::signbit(x), sign_of(h)) << std::hex << h;
      ASSERT_EQ((std::bit_cast<uint32_t>(x) >> 13) & 0x3ffu, h & 0x3ffu) << "payload of 0x" << std::hex << h;
      continue;
    }
    ASSERT_EQ(static_cast<double>(x), decode(kF16, h)) << std::hex << h;
    ASSERT_EQ(std::signbit(x), sign_of(h)) << std::hex << h;
  }
}

TEST(FloatConvert, BFloat16ToFloat32IsTheUpperHalfForAll65536Values) {
  for (uint32_t i = 0; i < 65536; ++i) {
    const auto h = static_cast<uint16_t>(i);
    const float x = bf16_to_f32(h);
    ASSERT_EQ(std::bit_cast<uint32_t>(x), i << 16);
    if (!kBF16.is_nan(h)) {
      ASSERT_EQ(static_cast<double>(x), decode(kBF16, h)) << std::hex << h;
    }
  }
}

TEST(FloatConvert, All65536ValuesRoundTripThroughFloat32) {
  for (const Format* f : {&kF16, &kBF16}) {
    for (uint32_t i = 0; i < 65536; ++i) {
      const auto h = static_cast<uint16_t>(i);
      const uint16_t back = to_format(*f, from_format(*f, h));
      // A signalling NaN comes back quiet, every other pattern unchanged.
      const uint16_t want = f->is_nan(h) ? static_cast<uint16_t>(h | f->quiet_bit()) : h;
      ASSERT_EQ(back, want) << f->name << " 0x" << std::hex << h;
    }
  }
}

// Every representable value, the midpoints to its neighbours (the ties) and
// the floats just either side of each: every rounding boundary, exhaustively.
TEST(FloatConvert, NarrowingMatchesReferenceAtEveryRoundingBoundary) {
  for (const Format* f : {&kF16, &kBF16}) {
    for (uint32_t i = 0; i < 0x8000; ++i) {
      const auto h = static_cast<uint16_t>(i);
      if ((h & f->exponent_mask()) == f->exponent_mask()) continue;  // inf / NaN
      const double low = decode(*f, h);
      // Above the largest finite value comes infinity: use the next power of two.
      const double high = decode(*f, static_cast<uint16_t>(h + 1));
      const double next = std::isinf(high) ? std::ldexp(1.0, f->bias() + 1) : high;
      const auto mid = static_cast<float>((low + next) / 2);  // exact: needs one more bit than the format
      ASSERT_EQ(static_cast<double>(mid), (low + next) / 2);
      for (float x : {static_cast<float>(low), mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY),
                      std::nextafter(static_cast<float>(low), INFINITY)}) {
        check_narrowing(*f, x);
        check_narrowing(*f, -x);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

TEST(FloatConvert, NarrowingMatchesReferenceOnRandomFloats) {
  std::mt19937_64 rng = testing::seeded_rng();
  std::uniform_int_distribution<uint32_t> any_bits;
  // Exponents around the 16-bit formats' ranges, where the interesting cases are.
  std::uniform_int_distribution<uint32_t> exponent(127 - 30, 127 + 17);
  for (int i = 0; i < 200000; ++i) {
    const float anything = std::bit_cast<float>(any_bits(rng));
    const float near_f16 = std::bit_cast<float>((any_bits(rng) & 0x807fffffu) | (exponent(rng) << 23));
    for (const Format* f : {&kF16, &kBF16}) {
      check_narrowing(*f, anything);
      check_narrowing(*f, near_f16);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

TEST(FloatConvert, SpecialValues) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(f32_to_f16(kInf), 0x7c00);
  EXPECT_EQ(f32_to_f16(-kInf), 0xfc00);
  EXPECT_EQ(f32_to_bf16(kInf), 0x7f80);
  EXPECT_EQ(f32_to_bf16(-kInf), 0xff80);
  EXPECT_EQ(f32_to_f16(0.0f), 0x0000);
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_bf16(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);                    // largest f16
  EXPECT_EQ(f32_to_f16(1e6f), 0x7c00);                        // overflow to infinity
  EXPECT_EQ(f32_to_f16(-1e6f), 0xfc00);
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds past the top
  EXPECT_EQ(f32_to_f16(0x1p-24f), 0x0001);                    // smallest f16 subnormal
  EXPECT_EQ(f32_to_f16(0x1p-14f), 0x0400);                    // smallest f16 normal
  EXPECT_EQ(f32_to_f16(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x00018000u)), 0x0002);  // f32 subnormal tie, to even
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x00008000u)), 0x0000);
  EXPECT_EQ(f16_to_f32(0x0001), 0x1p-24f);
  EXPECT_EQ(f16_to_f32(0x03ff), 0x3ffp-24f);                  // largest subnormal
  EXPECT_EQ(f16_to_f32(0xfc00), -kInf);
  EXPECT_EQ(std::bit_cast<uint32_t>(f16_to_f32(0x8000)), 0x80000000u);
}

TEST(FloatConvert, NaNsStayQuietNaNsWithTheirSign) {
  for (uint32_t bits : {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u, 0x7fffffffu, 0x7fa00000u}) {
    const float nan = std::bit_cast<float>(bits);
    const uint16_t h = f32_to_f16(nan);
    const uint16_t b = f32_to_bf16(nan);
    EXPECT_TRUE(kF16.is_nan(h) && (h & 0x0200)) << std::hex << bits << " -> " << h;
    EXPECT_TRUE(kBF16.is_nan(b) && (b & 0x0040)) << std::hex << bits << " -> " << b;
    EXPECT_EQ(sign_of(h), (bits >> 31) != 0);
    EXPECT_EQ(sign_of(b), (bits >> 31) != 0);
  }
}

template <typename T>
std::vector<std::byte> bytes_of(const std::vector<T>& values) {
  std::vector<std::byte> out(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

TEST(FloatConvert, ConvertFloatsEveryPairOfTypes) {
  const std::vector<float> values = {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 1e-7f, 3.14159265f, 1e30f};
  const std::vector<std::byte> f32 = bytes_of(values);
  std::vector<uint16_t> f16_values, bf16_values;
  for (float v : values) {
    f16_values.push_back(f32_to_f16(v));
    bf16_values.push_back(f32_to_bf16(v));
  }
  const std::vector<std::byte> f16 = bytes_of(f16_values);
  const std::vector<std::byte> bf16 = bytes_of(bf16_values);
  const uint64_t n = values.size();
  auto convert = [&](DType from, const std::vector<std::byte>& src, DType to) {
    std::vector<std::byte> dst(n * element_bytes(to));
    convert_floats(from, src, to, dst, n);
    return dst;
  };
  EXPECT_EQ(convert(DType::kF32, f32, DType::kF16), f16);
  EXPECT_EQ(convert(DType::kF32, f32, DType::kBF16), bf16);
  EXPECT_EQ(convert(DType::kF32, f32, DType::kF32), f32);
  EXPECT_EQ(convert(DType::kF16, f16, DType::kF16), f16);
  std::vector<float> widened;
  for (uint16_t h : f16_values) widened.push_back(f16_to_f32(h));
  EXPECT_EQ(convert(DType::kF16, f16, DType::kF32), bytes_of(widened));
  // f16 -> bf16 goes through the exact f32 value, so it rounds once.
  std::vector<uint16_t> f16_to_bf16;
  for (uint16_t h : f16_values) f16_to_bf16.push_back(f32_to_bf16(f16_to_f32(h)));
  EXPECT_EQ(convert(DType::kF16, f16, DType::kBF16), bytes_of(f16_to_bf16));
  std::vector<uint16_t> bf16_to_f16;
  for (uint16_t b : bf16_values) bf16_to_f16.push_back(f32_to_f16(bf16_to_f32(b)));
  EXPECT_EQ(convert(DType::kBF16, bf16, DType::kF16), bytes_of(bf16_to_f16));
}

TEST(FloatConvert, TensorBytesAreLittleEndian) {
  const std::vector<std::byte> one = bytes_of(std::vector<float>{1.0f});
  std::vector<std::byte> out(2);
  convert_floats(DType::kF32, one, DType::kF16, out, 1);
  EXPECT_EQ(out, (std::vector<std::byte>{std::byte{0x00}, std::byte{0x3c}}));
  convert_floats(DType::kF32, one, DType::kBF16, out, 1);
  EXPECT_EQ(out, (std::vector<std::byte>{std::byte{0x80}, std::byte{0x3f}}));
}

TEST(FloatConvert, ConvertFloatsRejectsWrongSizesAndTypes) {
  std::vector<std::byte> src(8), dst(4);
  EXPECT_TRUE(testing::throws_error([&] { convert_floats(DType::kF32, src, DType::kF16, dst, 3); },
                                    ErrorCode::kInvalidArgument, {"8", "4", "3"}));
  EXPECT_TRUE(testing::throws_error([&] { convert_floats(DType::kF32, src, DType::kF16, dst, 1); },
                                    ErrorCode::kInvalidArgument));
  // A count whose byte size wraps around 2^64 must not pass as a small one.
  std::vector<std::byte> four(4), two(2);
  const uint64_t wrapping = (uint64_t{1} << 62) + 1;
  EXPECT_TRUE(testing::throws_error([&] { convert_floats(DType::kF32, four, DType::kF16, two, wrapping); },
                                    ErrorCode::kInvalidArgument));
  EXPECT_TRUE(testing::throws_error([&] { convert_floats(DType::kI32, four, DType::kF32, four, 1); },
                                    ErrorCode::kUnsupported, {"I32"}));
  EXPECT_TRUE(testing::throws_error([&] { convert_floats(DType::kF32, four, DType::kF64, dst, 1); },
                                    ErrorCode::kUnsupported, {"F64"}));
}

}  // namespace
}  // namespace reshard
