#include "run_bytes.h"

namespace reshard::execute_detail {
namespace {

template <typename Run, typename Rows>
std::vector<Run> expand(std::span<const Rows> rows) {
  std::vector<Run> runs;
  for (const Rows& r : rows) {
    for (uint64_t i = 0; i < r.count; ++i) {
      runs.push_back(Run{r.data + static_cast<int64_t>(i) * r.stride, static_cast<size_t>(r.size)});
    }
  }
  return runs;
}

}  // namespace

std::vector<ConstByteRun> runs_of(std::span<const ConstRunRows> rows) { return expand<ConstByteRun>(rows); }
std::vector<ByteRun> runs_of(std::span<const RunRows> rows) { return expand<ByteRun>(rows); }

}  // namespace reshard::execute_detail
