#include "reshard/storage/part_layout.h"

#include <algorithm>

#include <fmt/format.h>

#include "reshard/layout/error.h"
#include "reshard/storage/storage_error.h"

namespace reshard::storage {
namespace {

uint64_t divide_up(uint64_t a, uint64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

std::string mib(uint64_t bytes) { return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20)); }

}  // namespace

PartRules s3_part_rules() {
  PartRules rules;
  rules.min_part_bytes = uint64_t{5} << 20;
  rules.max_part_bytes = uint64_t{5} << 30;
  rules.max_parts = 10000;
  rules.default_part_bytes = uint64_t{64} << 20;
  return rules;
}

PartLayout::PartLayout(uint64_t object_bytes, uint64_t part_bytes)
    : object_bytes_(object_bytes), part_bytes_(part_bytes) {
  count_ = object_bytes == 0 ? 1 : static_cast<uint32_t>(divide_up(object_bytes, part_bytes));
}

PartLayout PartLayout::plan(uint64_t object_bytes, uint64_t wanted_part_bytes, const PartRules& rules) {
  if (wanted_part_bytes != 0 &&
      (wanted_part_bytes < rules.min_part_bytes || wanted_part_bytes > rules.max_part_bytes)) {
    throw Error(kPartSizeOutOfRange,
                fmt::format("a part size of {} is outside this store's limits ({} to {})", mib(wanted_part_bytes),
                            mib(rules.min_part_bytes), mib(rules.max_part_bytes)));
  }
  uint64_t part = wanted_part_bytes != 0 ? wanted_part_bytes : rules.default_part_bytes;
  part = std::max({part, rules.min_part_bytes, uint64_t{1}});
  // Grow the parts until they number at most max_parts.
  const uint64_t fewest = divide_up(object_bytes, rules.max_parts);
  if (part < fewest) part = fewest;
  if (part > rules.max_part_bytes) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("an object of {} bytes does not fit in {} parts of at most {}", object_bytes,
                            rules.max_parts, mib(rules.max_part_bytes)));
  }
  // A single part needs no minimum; never make one larger than the object.
  if (object_bytes > 0 && part > object_bytes) part = object_bytes;
  return PartLayout(object_bytes, std::max<uint64_t>(part, 1));
}

PartLayout PartLayout::single(uint64_t object_bytes) { return PartLayout(object_bytes, std::max<uint64_t>(object_bytes, 1)); }

uint64_t PartLayout::offset(uint32_t index) const {
  if (index >= count_) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("part {} of an upload of {} parts", index, count_));
  }
  return static_cast<uint64_t>(index) * part_bytes_;
}

uint64_t PartLayout::size(uint32_t index) const {
  const uint64_t start = offset(index);
  return std::min(part_bytes_, object_bytes_ - start);
}

uint32_t PartLayout::part_of(uint64_t offset) const {
  if (offset >= object_bytes_) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("byte {} is past the end of an object of {} bytes", offset, object_bytes_));
  }
  return static_cast<uint32_t>(offset / part_bytes_);
}

}  // namespace reshard::storage
