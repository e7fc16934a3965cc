// Internal to the planner: a shared piece cut into the parts its holder processes send.
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "reshard/layout/box.h"

namespace reshard::plan_detail {

// A piece that occupies bytes [begin, begin + bytes) of its group's total,
// where holder j of the group sends bytes [ends[j - 1], ends[j]) (ends[-1] is
// 0): calls part(j, sub_box) for each holder's part, in order, as slabs along
// the piece's outermost dimension longer than 1, each cut at the row nearest
// its byte boundary (so a part can be a row larger or smaller than its
// share, or empty and skipped). The parts tile the piece exactly.
void split_by_shares(const Box& piece, uint64_t begin, uint64_t bytes, std::span<const uint64_t> ends,
                     const std::function<void(size_t, Box)>& part);

}  // namespace reshard::plan_detail
