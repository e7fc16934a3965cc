// TagMap: reshard's 64-bit tags onto MPI's (communicator, tag) pairs.
#pragma once

#include <cstddef>

#include "reshard/execute/transport.h"

namespace reshard::mpi_detail {

// Where one reshard tag travels: the index of a data communicator, and the
// MPI tag on it.
struct MpiTagSlot {
  size_t communicator = 0;
  int tag = 0;
  bool operator==(const MpiTagSlot&) const = default;
};

// MPI promises tags only up to MPI_TAG_UB, which may be as small as 32767,
// while every reshard operation owns Transport::kTagsPerOperation tags of a
// 64-bit space. Operations therefore take turns on a ring of slots: when
// MPI_TAG_UB is large, several operations share one communicator in disjoint
// tag blocks; when it is small, one operation spreads over several
// communicators. Two operations collide only if `concurrent_operations()`
// others began between them while they were both still in flight.
class TagMap {
 public:
  // `tag_ub`: the communicator's MPI_TAG_UB (at least 32767). The ring holds at
  // least `min_concurrent_operations` operations (at least 1).
  // Throws Error(kInvalidArgument) for values outside those bounds.
  TagMap(int tag_ub, size_t min_concurrent_operations);

  // How many duplicated communicators the ring needs.
  size_t num_communicators() const { return num_communicators_; }
  // How many operations may be in flight at once without sharing tags.
  size_t concurrent_operations() const { return ring_operations_; }

  // The slot of `tag`. Tags of one operation (base..base+kTagsPerOperation-1)
  // map to distinct slots, as do tags of operations less than
  // concurrent_operations() apart.
  MpiTagSlot map(Tag tag) const;

 private:
  int tag_bits_ = 0;                 // usable MPI tag bits: tags 0..2^tag_bits-1
  size_t operations_per_comm_ = 0;   // >= 1 when tag_bits >= operation bits
  size_t comms_per_operation_ = 0;   // >= 1 when tag_bits < operation bits
  size_t ring_operations_ = 0;
  size_t num_communicators_ = 0;
};

}  // namespace reshard::mpi_detail
