// The demo's checks: every element of what an operation produced against the
// reference's bits, counted per process and agreed across the job.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "reshard/execute/sharded_array.h"
#include "reshard/execute/transport.h"
#include "reshard/layout/box.h"
#include "reshard/layout/dtype.h"

namespace reshard::demo {

// What a check compared and what differed.
struct CheckTally {
  uint64_t tensors = 0;
  uint64_t elements = 0;
  uint64_t bytes = 0;
  uint64_t mismatches = 0;
  std::string first;  // the first difference (or other failure), named

  // Counts one failure; the first one's description (describe()) is kept.
  template <typename Describe>
  void fail(Describe&& describe) {
    if (mismatches++ == 0) first = describe();
  }
  void add(const CheckTally& other);
};

// The reference's bits of the element at row-major position `flat` (bf16 in the low 16 bits).
using ExpectedBits = std::function<uint32_t(uint64_t flat)>;

// Compares every element of this process's shards of `array` (tensor
// `name`) with `expected`; replicated copies are each compared.
void check_shards(std::string_view name, const ShardedArray& array, const ExpectedBits& expected, CheckTally& tally);

// Compares a stored tensor (its dtype name and shape as its file says, and
// its little-endian bytes) with the reference's dtype, shape and bits.
void check_stored(std::string_view name, DType dtype, const Shape& shape, std::string_view stored_dtype,
                  const std::vector<int64_t>& stored_shape, std::string_view bytes, const ExpectedBits& expected,
                  CheckTally& tally);

// Collective: the processes' tallies summed. When any process found a
// difference, every process throws Error(kInvalidArgument) "check failed:
// WHAT: N of M elements differ; first: ...", naming the lowest rank's first.
CheckTally agree_on_check(const CheckTally& local, Transport& transport, std::string_view what);

}  // namespace reshard::demo
