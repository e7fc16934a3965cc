#include "layout/checked.h"

#include <fmt/format.h>

#include "reshard/layout/error.h"

namespace reshard::layout_detail {
namespace {

[[noreturn]] void overflow(std::string_view what, auto a, char op, auto b) {
  throw Error(ErrorCode::kOverflow, fmt::format("{}: {} {} {} overflows", what, a, op, b));
}

}  // namespace

int64_t checked_add(int64_t a, int64_t b, std::string_view what) {
  int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) overflow(what, a, '+', b);
  return out;
}

int64_t checked_sub(int64_t a, int64_t b, std::string_view what) {
  int64_t out = 0;
  if (__builtin_sub_overflow(a, b, &out)) overflow(what, a, '-', b);
  return out;
}

int64_t checked_mul(int64_t a, int64_t b, std::string_view what) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) overflow(what, a, '*', b);
  return out;
}

uint64_t checked_add(uint64_t a, uint64_t b, std::string_view what) {
  uint64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) overflow(what, a, '+', b);
  return out;
}

uint64_t checked_mul(uint64_t a, uint64_t b, std::string_view what) {
  uint64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) overflow(what, a, '*', b);
  return out;
}

int64_t checked_product(std::span<const int64_t> extents, std::string_view what) {
  int64_t product = 1;
  for (int64_t extent : extents) product = checked_mul(product, extent, what);
  return product;
}

bool range_inside(uint64_t address, uint64_t size, uint64_t base, uint64_t bytes) {
  return address >= base && address - base <= bytes && size <= bytes - (address - base);
}

}  // namespace reshard::layout_detail
