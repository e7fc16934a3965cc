// Bit-exact conversions between f32, f16 and bf16 (round to nearest even).
#pragma once

#include <cstdint>
#include <span>

#include "reshard/layout/dtype.h"

namespace reshard::layout_detail {

// f32 -> bf16 / f16 bits, rounding to nearest, ties to even. NaN stays NaN
// (quiet, sign kept), infinities stay infinite, overflow in f16 gives infinity.
uint16_t f32_to_bf16(float value);
uint16_t f32_to_f16(float value);

// bf16 / f16 bits -> f32, exact.
float bf16_to_f32(uint16_t bits);
float f16_to_f32(uint16_t bits);

// Converts `count` little-endian elements from `src` (of `from`) into `dst`
// (of `to`). Both must be castable floats (F32, F16, BF16); equal types copy.
// Spans must hold exactly count elements of their type.
void convert_floats(DType from, std::span<const std::byte> src, DType to,
                    std::span<std::byte> dst, uint64_t count);

}  // namespace reshard::layout_detail
