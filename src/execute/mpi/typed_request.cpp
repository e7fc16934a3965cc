#include "typed_request.h"

#include <utility>

#include <fmt/format.h>

#include "mpi_error.h"
#include "orphans.h"
#include "reshard/layout/error.h"

namespace reshard::mpi_detail {

TypedRequest::TypedRequest(ProgressEngine& engine, bool is_send, int peer, Tag tag, MPI_Comm comm, int mpi_tag,
                           const std::vector<MPI_Aint>& addresses, const std::vector<int>& lengths, size_t bytes,
                           std::shared_ptr<const void> owner)
    : PolledRequest(engine, peer),
      is_send_(is_send),
      tag_(tag),
      comm_(comm),
      mpi_tag_(mpi_tag),
      bytes_(bytes),
      owner_(std::move(owner)) {
  check_mpi(MPI_Type_create_hindexed(static_cast<int>(lengths.size()), lengths.data(), addresses.data(), MPI_BYTE,
                                     &type_),
            "describing a gathered message");
  check_mpi(MPI_Type_commit(&type_), "committing a gathered message's datatype");
  if (is_send_) {
    check_mpi(MPI_Isend(MPI_BOTTOM, 1, type_, peer_, mpi_tag_, comm_, &request_), describe());
    posted_ = true;
  }
  engine_.add(this);
}

TypedRequest::~TypedRequest() {
  auto guard = engine_.lock();
  engine_.remove(this);
  // A message still in MPI's hands (a send its peer has not taken, a matched
  // receive still arriving) goes to Orphans with a share of the runs' owner,
  // so their memory outlives it. Freeing the datatype does not affect it.
  if (request_ != MPI_REQUEST_NULL) {
    int finished = 0;
    if (MPI_Test(&request_, &finished, MPI_STATUS_IGNORE) == MPI_SUCCESS && finished == 0) {
      Orphans::instance().adopt(request_, owner_);
    }
  }
  if (type_ != MPI_DATATYPE_NULL) MPI_Type_free(&type_);
}

bool TypedRequest::advance() {
  if (!posted_) {
    int arrived = 0;
    MPI_Message message = MPI_MESSAGE_NULL;
    MPI_Status status;
    check_mpi(MPI_Improbe(peer_, mpi_tag_, comm_, &arrived, &message, &status), describe());
    if (arrived == 0) return false;
    int count = 0;
    check_mpi(MPI_Get_count(&status, MPI_BYTE, &count), "reading an arriving message's size");
    if (count < 0 || static_cast<size_t>(count) != bytes_) {
      throw Error(ErrorCode::kTransport, fmt::format("rank {}: {}: the sender sent {} bytes (do both sides agree on "
                                                     "the message size?)",
                                                     engine_.rank(), describe(), count));
    }
    check_mpi(MPI_Imrecv(MPI_BOTTOM, 1, type_, &message, &request_), describe());
    posted_ = true;
  }
  int finished = 0;
  check_mpi(MPI_Test(&request_, &finished, MPI_STATUS_IGNORE), describe());
  if (finished == 0) return false;
  done_ = true;
  engine_.note_completion();
  engine_.count_completed(is_send_, bytes_);
  return true;
}

std::string TypedRequest::describe() const {
  return is_send_ ? fmt::format("sending {} gathered bytes to rank {} (tag {})", bytes_, peer_, tag_)
                  : fmt::format("receiving {} scattered bytes from rank {} (tag {})", bytes_, peer_, tag_);
}

}  // namespace reshard::mpi_detail
