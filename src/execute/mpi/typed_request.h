// TypedRequest: one gathered send or scattered receive, carried as one MPI message of a derived datatype.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "polled_request.h"
#include "progress_engine.h"
#include "reshard/execute/transport.h"
#include "reshard/layout/error.h"

namespace reshard::mpi_detail {

// The runs become one MPI_Type_create_hindexed over absolute addresses
// (MPI_BOTTOM), so MPI moves the bytes between the runs and its own buffers
// with no packing pass of ours. A receive is posted only once a message of
// the expected size has arrived (MPI_Improbe, MPI_Imrecv), as SegmentedRequest
// does. The engine drives every pending one (so a receive is matched as soon
// as its message arrives, whatever is waited on); an MPI error is kept and
// thrown by the next wait() or test(). `owner` keeps
// the runs' memory alive; a request destroyed before MPI is done with it
// leaves its MPI request to Orphans with a share of it.
class TypedRequest final : public PolledRequest {
 public:
  // Under the engine's lock. `bytes` (the runs' total) and the number of runs
  // are at most INT_MAX; runs are at most INT_MAX bytes each.
  TypedRequest(ProgressEngine& engine, bool is_send, int peer, Tag tag, MPI_Comm comm, int mpi_tag,
               const std::vector<MPI_Aint>& addresses, const std::vector<int>& lengths, size_t bytes,
               std::shared_ptr<const void> owner);
  ~TypedRequest() override;
  TypedRequest(const TypedRequest&) = delete;
  TypedRequest& operator=(const TypedRequest&) = delete;


 private:
  // Under the lock: matches an arrived receive, tests for completion.
  bool advance() override;
  std::string describe() const override;

  bool is_send_;
  Tag tag_;
  MPI_Comm comm_;
  int mpi_tag_;
  size_t bytes_;
  std::shared_ptr<const void> owner_;
  MPI_Datatype type_ = MPI_DATATYPE_NULL;
  MPI_Request request_ = MPI_REQUEST_NULL;
  bool posted_ = false;
};

}  // namespace reshard::mpi_detail
