// RunGroups: a run list as arithmetic progressions, to describe memory to another process in a few words.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "reshard/layout/byte_run.h"

namespace reshard::mpi_detail {

// `count` runs of `size` bytes, the i-th at address + i * stride (unsigned
// arithmetic, so a stride may step backwards). The runs of a strided box
// come in such progressions, one per row of runs, so a message of a million
// 256-byte runs is described by a few groups.
struct RunGroup {
  uint64_t address = 0;
  uint64_t size = 0;
  uint64_t stride = 0;
  uint64_t count = 0;
};

// The runs in order as groups; empty runs are dropped, and runs that follow
// one another in memory merge into one.
std::vector<RunGroup> group_runs(std::span<const ConstByteRun> runs);
std::vector<RunGroup> group_runs(std::span<const ByteRun> runs);
// The same from rows (a box copy's own): a word per stretch of rows, none per run.
std::vector<RunGroup> group_rows(std::span<const ConstRunRows> rows);
std::vector<RunGroup> group_rows(std::span<const RunRows> rows);

// How many runs (iovecs) the groups hold, and their bytes. Throws
// Error(kOverflow) for groups from a peer whose bytes do not fit 64 bits.
uint64_t count_runs(std::span<const RunGroup> groups);
uint64_t count_bytes(std::span<const RunGroup> groups);

// Whether every run of `group` lies inside [base, base + bytes). A peer's
// groups are checked before they are read in place: a wrapped progression or
// one that strays is outside.
bool group_inside(const RunGroup& group, uint64_t base, uint64_t bytes);

// Walks the runs of a group list, handing them out as iovecs.
class RunCursor {
 public:
  explicit RunCursor(std::span<const RunGroup> groups) : groups_(groups) { skip_empty(); }

  // Fills `out` (at most out.size() iovecs) with the next runs from the
  // current position, covering at most `max_bytes`; does not advance.
  // Returns how many iovecs and their bytes.
  struct Filled {
    size_t iovecs = 0;
    uint64_t bytes = 0;
  };
  Filled peek(std::span<iovec> out, uint64_t max_bytes) const;

  // Moves past `bytes` (at most what remains).
  void advance(uint64_t bytes);

  bool at_end() const { return group_ == groups_.size(); }

 private:
  void skip_empty();

  std::span<const RunGroup> groups_;
  size_t group_ = 0;
  uint64_t run_ = 0;     // within the group
  uint64_t offset_ = 0;  // within the run
};

}  // namespace reshard::mpi_detail
