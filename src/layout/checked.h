// Overflow-checked arithmetic for sizes and offsets computed from input.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace reshard::layout_detail {

// a + b, a - b, a * b; throw Error(kOverflow) naming `what` when the result does not fit.
int64_t checked_add(int64_t a, int64_t b, std::string_view what);
int64_t checked_sub(int64_t a, int64_t b, std::string_view what);
int64_t checked_mul(int64_t a, int64_t b, std::string_view what);
uint64_t checked_add(uint64_t a, uint64_t b, std::string_view what);
uint64_t checked_mul(uint64_t a, uint64_t b, std::string_view what);

// Whether [address, address + size) lies inside [base, base + bytes), with no
// overflow on the way (a range that would wrap is outside).
bool range_inside(uint64_t address, uint64_t size, uint64_t base, uint64_t bytes);

// Product of non-negative extents (1 for an empty list), overflow-checked.
int64_t checked_product(std::span<const int64_t> extents, std::string_view what);

}  // namespace reshard::layout_detail
