#include "run_copy.h"

#include <algorithm>
#include <cstddef>

#include "layout/copy_bytes.h"

namespace reshard::mpi_detail {
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

void copy_between_runs(std::span<const RunGroup> to, std::span<const RunGroup> from, uint64_t bytes) {
  const CopyMode mode = bytes >= kStreamingBytes ? CopyMode::kStreaming : CopyMode::kCached;
  GroupWalker dst(to);
  GroupWalker src(from);
  uint64_t left = bytes;
  while (left > 0) {
    const uint64_t src_size = src.group().size;
    const uint64_t dst_size = dst.group().size;
    if (src.at_run_start() && dst.at_run_start() && src_size == dst_size && left >= src_size) {
      // Rows of one size on both sides.
      const uint64_t rows = std::min({src.runs_left(), dst.runs_left(), left / src_size});
      copy_rows(dst.address(), static_cast<int64_t>(dst.group().stride), src.address(),
                static_cast<int64_t>(src.group().stride), src_size, rows, mode);
      src.skip_runs(rows);
      dst.skip_runs(rows);
      left -= rows * src_size;
    } else if (src.at_run_start() && dst.left_in_run() >= 2 * src_size && src.runs_left() > 1 && left >= 2 * src_size) {
      // Rows gathered into one long run.
      const uint64_t rows = std::min({src.runs_left(), dst.left_in_run() / src_size, left / src_size});
      copy_rows(dst.address(), static_cast<int64_t>(src_size), src.address(), static_cast<int64_t>(src.group().stride),
                src_size, rows, mode);
      src.skip_runs(rows);
      dst.skip_in_run(rows * src_size);
      left -= rows * src_size;
    } else if (dst.at_run_start() && src.left_in_run() >= 2 * dst_size && dst.runs_left() > 1 && left >= 2 * dst_size) {
      // One long run scattered into rows.
      const uint64_t rows = std::min({dst.runs_left(), src.left_in_run() / dst_size, left / dst_size});
      copy_rows(dst.address(), static_cast<int64_t>(dst.group().stride), src.address(), static_cast<int64_t>(dst_size),
                dst_size, rows, mode);
      dst.skip_runs(rows);
      src.skip_in_run(rows * dst_size);
      left -= rows * dst_size;
    } else {
      const uint64_t n = std::min({src.left_in_run(), dst.left_in_run(), left});
      copy_bytes(dst.address(), src.address(), static_cast<size_t>(n), mode);
      src.skip_in_run(n);
      dst.skip_in_run(n);
      left -= n;
    }
  }
  if (mode == CopyMode::kStreaming) finish_streaming();
}

}  // namespace reshard::mpi_detail
