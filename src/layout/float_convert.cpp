#include "layout/float_convert.h"

#include <bit>
#include <cstring>

#include <fmt/format.h>

#include "reshard/layout/error.h"

namespace reshard::layout_detail {

static_assert(std::endian::native == std::endian::little,
              "tensor bytes are little-endian; a big-endian host needs byte swaps here");

uint16_t f32_to_bf16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);  // keep sign, force quiet
  }
  const uint32_t rounding_bias = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding_bias) >> 16);
}

float bf16_to_f32(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

namespace {

// Shifts `mantissa` right by `shift` bits, rounding to nearest, ties to even.
uint32_t shift_round_even(uint32_t mantissa, int shift) {
  const uint32_t kept = mantissa >> shift;
  const uint32_t rest = mantissa & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  return (rest > half || (rest == half && (kept & 1u))) ? kept + 1 : kept;
}

}  // namespace

uint16_t f32_to_f16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const int exponent = static_cast<int>((bits >> 23) & 0xffu);
  const uint32_t mantissa = bits & 0x7fffffu;
  if (exponent == 0xff) {
    if (mantissa == 0) return static_cast<uint16_t>(sign | 0x7c00u);
    return static_cast<uint16_t>(sign | 0x7e00u | (mantissa >> 13));
  }
  const int half_exponent = exponent - 127 + 15;
  if (half_exponent >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  if (half_exponent <= 0) {
    // Subnormal in f16 (or zero): the implicit leading 1 becomes explicit.
    const int shift = 14 - half_exponent;
    if (shift > 25) return static_cast<uint16_t>(sign);
    return static_cast<uint16_t>(sign | shift_round_even(mantissa | 0x800000u, shift));
  }
  // A carry out of the mantissa correctly bumps the exponent (up to infinity).
  const uint32_t packed = (static_cast<uint32_t>(half_exponent) << 23) | mantissa;
  return static_cast<uint16_t>(sign | shift_round_even(packed, 13));
}

float f16_to_f32(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1fu;
  uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  if (exponent != 0) {
    return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  }
  if (mantissa == 0) return std::bit_cast<float>(sign);
  int unbiased = -14;
  while ((mantissa & 0x400u) == 0) {
    mantissa <<= 1;
    --unbiased;
  }
  mantissa &= 0x3ffu;
  return std::bit_cast<float>(sign | static_cast<uint32_t>(unbiased + 127) << 23 |
                              (mantissa << 13));
}

namespace {

float load_as_f32(DType dtype, const std::byte* p) {
  if (dtype == DType::kF32) {
    float v;
    std::memcpy(&v, p, 4);
    return v;
  }
  uint16_t h;
  std::memcpy(&h, p, 2);
  return dtype == DType::kBF16 ? bf16_to_f32(h) : f16_to_f32(h);
}

void store_from_f32(DType dtype, float v, std::byte* p) {
  if (dtype == DType::kF32) {
    std::memcpy(p, &v, 4);
    return;
  }
  const uint16_t h = dtype == DType::kBF16 ? f32_to_bf16(v) : f32_to_f16(v);
  std::memcpy(p, &h, 2);
}

}  // namespace

void convert_floats(DType from, std::span<const std::byte> src, DType to, std::span<std::byte> dst,
                    uint64_t count) {
  if (!is_castable_float(from) || !is_castable_float(to)) {
    throw Error(ErrorCode::kUnsupported,
                fmt::format("cannot cast {} to {}: only F32, F16 and BF16 are cast",
                            dtype_name(from), dtype_name(to)));
  }
  const size_t in_size = element_bytes(from);
  const size_t out_size = element_bytes(to);
  // Divide rather than multiply: count * size can wrap and let a short buffer pass.
  if (src.size() % in_size != 0 || src.size() / in_size != count ||
      dst.size() % out_size != 0 || dst.size() / out_size != count) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("convert_floats: buffers of {} and {} bytes do not hold {} elements "
                            "of {} and {}",
                            src.size(), dst.size(), count, dtype_name(from), dtype_name(to)));
  }
  if (from == to) {
    if (count != 0) std::memcpy(dst.data(), src.data(), src.size());
    return;
  }
  for (uint64_t i = 0; i < count; ++i) {
    store_from_f32(to, load_as_f32(from, src.data() + i * in_size), dst.data() + i * out_size);
  }
}

}  // namespace reshard::layout_detail
