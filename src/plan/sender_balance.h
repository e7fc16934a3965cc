// Internal to the planner: how much of each shared piece each holder process sends.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace reshard::plan_detail {

// Bytes that any one of several holder processes may send.
struct SendGroup {
  std::vector<int> holders;  // ascending process ids, at least two
  uint64_t bytes = 0;
};

// Splits every group's bytes over its holders so that the largest load of any
// process (its `fixed` bytes, which it alone can send, plus its shares) is as
// small as possible: result[g][j] is what holders[j] of group g sends, and
// each group's shares add up to its bytes. Exact, in whole bytes, and the same
// on every process for the same input: the smallest feasible largest load is
// found by bisection, each step a max-flow (groups -> holders -> sink, a
// holder's capacity the room it has left under the bound).
std::vector<std::vector<uint64_t>> balance_sends(std::span<const uint64_t> fixed, std::span<const SendGroup> groups);

}  // namespace reshard::plan_detail
