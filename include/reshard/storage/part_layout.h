// How an object's bytes are cut into the parts of a parallel upload. Every
// process computes the same layout from the same size and rules, so a part
// number means the same byte range everywhere without any message.
#pragma once

#include <cstdint>

namespace reshard::storage {

// What a store allows of a multipart upload's parts.
struct PartRules {
  uint64_t min_part_bytes = 1;              // every part but the last is at least this
  uint64_t max_part_bytes = UINT64_MAX;     // no part is larger
  uint32_t max_parts = UINT32_MAX;          // no more parts than this
  uint64_t default_part_bytes = 64 << 20;   // chosen when the caller asks for none
};

// The S3 protocol's limits: 5 MiB to 5 GiB a part, at most 10,000 parts.
PartRules s3_part_rules();

// Parts of equal size but the last, which holds the rest. An empty object
// has one empty part.
class PartLayout {
 public:
  // Cuts `object_bytes` into parts of `wanted_part_bytes` (0: the rules'
  // default), grown where needed to stay within `rules.max_parts` and to at
  // least `rules.min_part_bytes`. Error(kInvalidArgument) when the wanted size
  // is below the minimum or above the maximum, or the object cannot fit in
  // max_parts parts of max_part_bytes.
  static PartLayout plan(uint64_t object_bytes, uint64_t wanted_part_bytes, const PartRules& rules);
  // One part holding the whole object.
  static PartLayout single(uint64_t object_bytes);

  uint64_t object_bytes() const { return object_bytes_; }
  uint64_t part_bytes() const { return part_bytes_; }
  uint32_t count() const { return count_; }
  // The first byte of part `index` and its size (Error(kInvalidArgument) past the last).
  uint64_t offset(uint32_t index) const;
  uint64_t size(uint32_t index) const;
  // The part holding byte `offset` (< object_bytes()).
  uint32_t part_of(uint64_t offset) const;

  friend bool operator==(const PartLayout&, const PartLayout&) = default;

 private:
  PartLayout(uint64_t object_bytes, uint64_t part_bytes);

  uint64_t object_bytes_ = 0;
  uint64_t part_bytes_ = 0;
  uint32_t count_ = 1;
};

}  // namespace reshard::storage
