#include "reshard/layout/dtype.h"

#include <array>
#include <cctype>
#include <string>

#include <fmt/format.h>

#include "layout/checked.h"
#include "reshard/layout/error.h"

namespace reshard {

using layout_detail::checked_mul;

namespace {

struct DTypeInfo {
  std::string_view name;
  int bits;
};

constexpr std::array<DTypeInfo, kNumDTypes> kInfo = {{
    {"BOOL", 8},        {"F4", 4},           {"F6_E2M3", 6},     {"F6_E3M2", 6},
    {"U8", 8},          {"I8", 8},           {"F8_E5M2", 8},     {"F8_E4M3", 8},
    {"F8_E8M0", 8},     {"F8_E4M3FNUZ", 8},  {"F8_E5M2FNUZ", 8}, {"I16", 16},
    {"U16", 16},        {"F16", 16},         {"BF16", 16},       {"I32", 32},
    {"U32", 32},        {"F32", 32},         {"C64", 64},        {"F64", 64},
    {"I64", 64},        {"U64", 64},
}};

const DTypeInfo& info(DType dtype) { return kInfo.at(static_cast<size_t>(dtype)); }

bool equals_ignoring_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::toupper(static_cast<unsigned char>(a[i])) !=
        std::toupper(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::string_view dtype_name(DType dtype) { return info(dtype).name; }

int dtype_bits(DType dtype) { return info(dtype).bits; }

size_t element_bytes(DType dtype) { return static_cast<size_t>(dtype_bits(dtype) / 8); }

std::optional<DType> parse_dtype(std::string_view name) {
  for (size_t i = 0; i < kInfo.size(); ++i) {
    if (equals_ignoring_case(kInfo[i].name, name)) return static_cast<DType>(i);
  }
  return std::nullopt;
}

DType dtype_from_string(std::string_view name) {
  if (auto dtype = parse_dtype(name)) return *dtype;
  throw Error(ErrorCode::kParse,
              fmt::format("unknown dtype '{}' (expected a safetensors name such as F32, BF16, "
                          "F16, I32, U8, BOOL)",
                          name));
}

bool is_castable_float(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16;
}

bool is_floating(DType dtype) {
  switch (dtype) {
    case DType::kBool: case DType::kU8: case DType::kI8: case DType::kI16:
    case DType::kU16: case DType::kI32: case DType::kU32: case DType::kI64:
    case DType::kU64:
      return false;
    default:
      return true;
  }
}

uint64_t dtype_byte_size(DType dtype, uint64_t elements) {
  const uint64_t bits =
      checked_mul(elements, static_cast<uint64_t>(dtype_bits(dtype)), "tensor size in bits");
  if (bits % 8 != 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{} elements of {} ({} bits each) do not fill whole bytes", elements,
                            dtype_name(dtype), dtype_bits(dtype)));
  }
  return bits / 8;
}

}  // namespace reshard
