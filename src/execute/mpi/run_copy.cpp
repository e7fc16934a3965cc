#include "run_copy.h"

#include <algorithm>
#include <cstddef>
#include <vector>

#include "layout/copy_bytes.h"

namespace reshard::mpi_detail {

using layout_detail::copy_bytes;
using layout_detail::copy_rows;
using layout_detail::CopyMode;
using layout_detail::finish_streaming;

namespace {

// Copies of this many bytes or more stream around the cache, as memcpy's own
// threshold for large sizes does.
constexpr uint64_t kStreamingBytes = uint64_t{1} << 20;

// A position in a run list: which group, which run of it, how far into it.
class GroupWalker {
 public:
  explicit GroupWalker(std::span<const RunGroup> groups) : groups_(groups) { skip_empty(); }

  const RunGroup& group() const { return groups_[group_]; }
  bool at_run_start() const { return offset_ == 0; }
  uint64_t left_in_run() const { return group().size - offset_; }
  uint64_t runs_left() const { return group().count - run_; }
  std::byte* address() const {
    return reinterpret_cast<std::byte*>(static_cast<uintptr_t>(group().address + run_ * group().stride + offset_));
  }

  // Past `rows` whole runs, from the start of one.
  void skip_runs(uint64_t rows) {
    run_ += rows;
    if (run_ == group().count) next_group();
  }
  // Past `bytes` within the current run.
  void skip_in_run(uint64_t bytes) {
    offset_ += bytes;
    if (offset_ == group().size) {
      offset_ = 0;
      skip_runs(1);
    }
  }

 private:
  void next_group() {
    ++group_;
    run_ = 0;
    skip_empty();
  }
  void skip_empty() {
    while (group_ < groups_.size() && (groups_[group_].size == 0 || groups_[group_].count == 0)) ++group_;
  }

  std::span<const RunGroup> groups_;
  size_t group_ = 0;
  uint64_t run_ = 0;
  uint64_t offset_ = 0;
};

}  // namespace

std::vector<GatherJob> row_copies_between_runs(std::span<const RunGroup> to, std::span<const RunGroup> from,
                                               uint64_t bytes) {
  std::vector<GatherJob> copies;
  const auto add = [&copies](const std::byte* src, uint64_t src_stride, std::byte* dst, uint64_t dst_stride,
                             uint64_t size, uint64_t rows) {
    copies.push_back({RunGroup{reinterpret_cast<uintptr_t>(src), size, src_stride, rows}, dst, dst_stride});
  };
  GroupWalker dst(to);
  GroupWalker src(from);
  uint64_t left = bytes;
  while (left > 0) {
    const uint64_t src_size = src.group().size;
    const uint64_t dst_size = dst.group().size;
    if (src.at_run_start() && dst.at_run_start() && src_size == dst_size && left >= src_size) {
      // Rows of one size on both sides.
      const uint64_t rows = std::min({src.runs_left(), dst.runs_left(), left / src_size});
      add(src.address(), src.group().stride, dst.address(), dst.group().stride, src_size, rows);
      src.skip_runs(rows);
      dst.skip_runs(rows);
      left -= rows * src_size;
    } else if (src.at_run_start() && dst.left_in_run() >= 2 * src_size && src.runs_left() > 1 && left >= 2 * src_size) {
      // Rows gathered into one long run.
      const uint64_t rows = std::min({src.runs_left(), dst.left_in_run() / src_size, left / src_size});
      add(src.address(), src.group().stride, dst.address(), src_size, src_size, rows);
      src.skip_runs(rows);
      dst.skip_in_run(rows * src_size);
      left -= rows * src_size;
    } else if (dst.at_run_start() && src.left_in_run() >= 2 * dst_size && dst.runs_left() > 1 && left >= 2 * dst_size) {
      // One long run scattered into rows.
      const uint64_t rows = std::min({dst.runs_left(), src.left_in_run() / dst_size, left / dst_size});
      add(src.address(), dst_size, dst.address(), dst.group().stride, dst_size, rows);
      dst.skip_runs(rows);
      src.skip_in_run(rows * dst_size);
      left -= rows * dst_size;
    } else {
      const uint64_t n = std::min({src.left_in_run(), dst.left_in_run(), left});
      add(src.address(), n, dst.address(), n, n, 1);
      src.skip_in_run(n);
      dst.skip_in_run(n);
      left -= n;
    }
  }
  return copies;
}

void copy_between_runs(std::span<const RunGroup> to, std::span<const RunGroup> from, uint64_t bytes) {
  const CopyMode mode = bytes >= kStreamingBytes ? CopyMode::kStreaming : CopyMode::kCached;
  for (const GatherJob& copy : row_copies_between_runs(to, from, bytes)) {
    const RunGroup& rows = copy.runs;
    if (rows.count == 1) {
      copy_bytes(copy.out, reinterpret_cast<const std::byte*>(rows.address), static_cast<size_t>(rows.size), mode);
    } else {
      // Strides may step backwards (unsigned wrap-around, as RunGroup's).
      copy_rows(copy.out, static_cast<int64_t>(copy.out_step()), reinterpret_cast<const std::byte*>(rows.address),
                static_cast<int64_t>(rows.stride), static_cast<size_t>(rows.size), rows.count, mode);
    }
  }
  if (mode == CopyMode::kStreaming) finish_streaming();
}

}  // namespace reshard::mpi_detail
