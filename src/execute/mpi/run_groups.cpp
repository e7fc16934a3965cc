#include "run_groups.h"

#include <algorithm>
#include <cstdint>

#include "layout/checked.h"

namespace reshard::mpi_detail {

using layout_detail::checked_add;
using layout_detail::checked_mul;
using layout_detail::range_inside;

namespace {

uint64_t address_of(const void* p) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p)); }

// Appends one run to the groups: it extends the last group when it follows
// its progression (or the last run in memory), and starts a new one otherwise.
void append_run(std::vector<RunGroup>& groups, uint64_t address, uint64_t size) {
  if (size == 0) return;
  if (!groups.empty()) {
    RunGroup& last = groups.back();
    if (last.count == 1 && last.address + last.size == address) {
      last.size += size;  // contiguous: one longer run
      return;
    }
    if (last.size == size) {
      if (last.count == 1) {
        last.stride = address - last.address;
        last.count = 2;
        return;
      }
      if (address == last.address + last.count * last.stride) {
        ++last.count;
        return;
      }
    }
  }
  groups.push_back(RunGroup{address, size, 0, 1});
}

template <typename Run>
std::vector<RunGroup> group_any(std::span<const Run> runs) {
  std::vector<RunGroup> groups;
  for (const Run& run : runs) append_run(groups, address_of(run.data), run.size);
  return groups;
}

// Rows that continue the last group (in memory, or along its steps) extend
// it; others start a group. Strides as unsigned steps, as RunGroup's.
void append_rows(std::vector<RunGroup>& groups, uint64_t address, uint64_t size, uint64_t stride, uint64_t count) {
  if (size == 0 || count == 0) return;
  if (count == 1) {
    append_run(groups, address, size);
    return;
  }
  if (!groups.empty()) {
    RunGroup& last = groups.back();
    const bool same_steps = last.size == size && (last.count == 1 || last.stride == stride);
    const uint64_t next = last.count == 1 ? last.address + stride : last.address + last.count * last.stride;
    if (same_steps && address == next) {
      last.stride = stride;
      last.count += count;
      return;
    }
  }
  groups.push_back(RunGroup{address, size, stride, count});
}

template <typename Rows>
std::vector<RunGroup> group_rows_any(std::span<const Rows> rows) {
  std::vector<RunGroup> groups;
  groups.reserve(rows.size());
  for (const Rows& r : rows) append_rows(groups, address_of(r.data), r.size, static_cast<uint64_t>(r.stride), r.count);
  return groups;
}

}  // namespace

std::vector<RunGroup> group_runs(std::span<const ConstByteRun> runs) { return group_any(runs); }
std::vector<RunGroup> group_runs(std::span<const ByteRun> runs) { return group_any(runs); }
std::vector<RunGroup> group_rows(std::span<const ConstRunRows> rows) { return group_rows_any(rows); }
std::vector<RunGroup> group_rows(std::span<const RunRows> rows) { return group_rows_any(rows); }

uint64_t count_runs(std::span<const RunGroup> groups) {
  uint64_t runs = 0;
  for (const RunGroup& group : groups) runs = checked_add(runs, group.count, "the runs of a peer's message");
  return runs;
}

uint64_t count_bytes(std::span<const RunGroup> groups) {
  uint64_t bytes = 0;
  for (const RunGroup& group : groups) {
    bytes = checked_add(bytes, checked_mul(group.size, group.count, "the bytes of a peer's runs"),
                        "the bytes of a peer's message");
  }
  return bytes;
}

RunCursor::Filled RunCursor::peek(std::span<iovec> out, uint64_t max_bytes) const {
  Filled filled;
  size_t group = group_;
  uint64_t run = run_;
  uint64_t offset = offset_;
  while (filled.iovecs < out.size() && filled.bytes < max_bytes && group < groups_.size()) {
    const RunGroup& g = groups_[group];
    const uint64_t take = std::min(g.size - offset, max_bytes - filled.bytes);
    out[filled.iovecs].iov_base = reinterpret_cast<void*>(static_cast<uintptr_t>(g.address + run * g.stride + offset));
    out[filled.iovecs].iov_len = static_cast<size_t>(take);
    ++filled.iovecs;
    filled.bytes += take;
    offset = 0;
    if (++run == g.count) {
      run = 0;
      ++group;
    }
  }
  return filled;
}

void RunCursor::advance(uint64_t bytes) {
  while (bytes > 0 && !at_end()) {
    const RunGroup& g = groups_[group_];
    const uint64_t step = std::min(g.size - offset_, bytes);
    offset_ += step;
    bytes -= step;
    if (offset_ == g.size) {
      offset_ = 0;
      if (++run_ == g.count) {
        run_ = 0;
        ++group_;
      }
    }
  }
  skip_empty();
}

void RunCursor::skip_empty() {
  while (group_ < groups_.size() && (groups_[group_].size == 0 || groups_[group_].count == 0)) ++group_;
}

bool group_inside(const RunGroup& group, uint64_t base, uint64_t bytes) {
  const auto run_inside = [&](uint64_t address) { return range_inside(address, group.size, base, bytes); };
  if (group.size == 0 || group.count == 0) return true;
  if (group.count - 1 > static_cast<uint64_t>(INT64_MAX)) return false;
  // The progression is monotonic in signed steps; its two ends inside (with
  // no overflow on the way) put every run between them inside too.
  int64_t span = 0;
  if (__builtin_mul_overflow(static_cast<int64_t>(group.count - 1), static_cast<int64_t>(group.stride), &span)) {
    return false;
  }
  return run_inside(group.address) && run_inside(group.address + static_cast<uint64_t>(span));
}

}  // namespace reshard::mpi_detail
