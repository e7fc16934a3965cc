// Element types: every safetensors dtype, its name, and its width in bits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace reshard {

// In the order of the safetensors reference's `Dtype` enum: that order decides
// where tensors go in a file, so it is part of the format.
enum class DType : uint8_t {
  kBool, kF4, kF6E2M3, kF6E3M2, kU8, kI8, kF8E5M2, kF8E4M3, kF8E8M0,
  kF8E4M3Fnuz, kF8E5M2Fnuz, kI16, kU16, kF16, kBF16, kI32, kU32, kF32,
  kC64, kF64, kI64, kU64,
};

inline constexpr int kNumDTypes = 22;

// The safetensors name, upper case ("F32", "F8_E4M3", "BOOL").
std::string_view dtype_name(DType dtype);

// Bits per element: 4, 6, 8, 16, 32 or 64.
int dtype_bits(DType dtype);

// Bytes per element (dtype_bits / 8); 0 for a sub-byte type, which only
// callers that take whole-byte types divide by.
size_t element_bytes(DType dtype);

// Parses a safetensors name in any case ("bf16", "F8_E4M3"). nullopt if unknown.
std::optional<DType> parse_dtype(std::string_view name);

// Like parse_dtype, but throws Error(kParse) naming the bad value.
DType dtype_from_string(std::string_view name);

// A floating type reshard can cast between: F32, F16 or BF16.
bool is_castable_float(DType dtype);

// Any floating or complex type (casts never touch integer or bool tensors).
bool is_floating(DType dtype);

// Bytes for `elements` elements; throws Error(kOverflow) on overflow and
// Error(kInvalidArgument) when a sub-byte type does not fill whole bytes.
uint64_t dtype_byte_size(DType dtype, uint64_t elements);

}  // namespace reshard
