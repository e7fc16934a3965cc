#include "tag_map.h"

#include <bit>
#include <cstdint>

#include <fmt/format.h>

#include "reshard/layout/error.h"

namespace reshard::mpi_detail {
namespace {

static_assert(std::has_single_bit(Transport::kTagsPerOperation));
constexpr int kOperationBits = std::countr_zero(Transport::kTagsPerOperation);
constexpr int kMpiMinTagUb = 32767;  // the least MPI_TAG_UB the MPI standard allows

size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

}  // namespace

TagMap::TagMap(int tag_ub, size_t min_concurrent_operations) {
  if (tag_ub < kMpiMinTagUb) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("MPI_TAG_UB {} is below the {} every MPI must allow", tag_ub, kMpiMinTagUb));
  }
  if (min_concurrent_operations < 1) {
    throw Error(ErrorCode::kInvalidArgument, "the tag ring must hold at least one operation");
  }
  // Tags 0..2^tag_bits-1 are all valid: the largest power of two <= tag_ub + 1.
  tag_bits_ = static_cast<int>(std::bit_width(static_cast<uint64_t>(tag_ub) + 1)) - 1;
  if (tag_bits_ >= kOperationBits) {
    operations_per_comm_ = size_t{1} << (tag_bits_ - kOperationBits);
    num_communicators_ = ceil_div(min_concurrent_operations, operations_per_comm_);
    ring_operations_ = num_communicators_ * operations_per_comm_;
  } else {
    comms_per_operation_ = size_t{1} << (kOperationBits - tag_bits_);
    ring_operations_ = min_concurrent_operations;
    num_communicators_ = ring_operations_ * comms_per_operation_;
  }
}

MpiTagSlot TagMap::map(Tag tag) const {
  const uint64_t operation = tag >> kOperationBits;
  const uint64_t offset = tag & (Transport::kTagsPerOperation - 1);
  const uint64_t slot = operation % ring_operations_;
  if (operations_per_comm_ > 0) {
    const uint64_t block = slot % operations_per_comm_;
    return {slot / operations_per_comm_, static_cast<int>((block << kOperationBits) | offset)};
  }
  const uint64_t tag_mask = (uint64_t{1} << tag_bits_) - 1;
  return {slot * comms_per_operation_ + (offset >> tag_bits_), static_cast<int>(offset & tag_mask)};
}

}  // namespace reshard::mpi_detail
