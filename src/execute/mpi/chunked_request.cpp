#include "chunked_request.h"

#include <algorithm>

#include <fmt/format.h>

#include "mpi_error.h"

namespace reshard::mpi_detail {

ChunkedRequest::ChunkedRequest(ProgressEngine& engine, ChunkedMessage message, size_t chunk_bytes)
    : engine_(engine), message_(message), chunk_bytes_(chunk_bytes) {
  engine_.add(this);
  advance();
}

ChunkedRequest::~ChunkedRequest() {
  auto guard = engine_.lock();
  cancel_posted();
  engine_.remove(this);
}

void ChunkedRequest::wait() {
  uint64_t seen = completions_;
  engine_.wait(
      [&] {
        throw_if_failed();
        if (done()) return WaitStep::kDone;
        const bool progressed = completions_ != seen;
        seen = completions_;
        return progressed ? WaitStep::kProgressed : WaitStep::kIdle;
      },
      [&] { return describe(); });
}

bool ChunkedRequest::test() {
  auto guard = engine_.lock();
  engine_.throw_if_aborted();
  engine_.progress();
  throw_if_failed();
  if (done()) return true;
  engine_.throw_if_peer_failed();
  return false;
}

void ChunkedRequest::advance() {
  if (error_ || done()) return;
  try {
    complete_finished_chunks();
    post_chunks();
  } catch (const Error& e) {
    error_ = e.with_context(fmt::format("rank {}: {}", engine_.rank(), describe()));
    cancel_posted();
  }
}

void ChunkedRequest::complete_finished_chunks() {
  for (PostedChunk& chunk : posted_) {
    int finished = 0;
    MPI_Status status;
    const int code = MPI_Test(&chunk.request, &finished, &status);
    if (code != MPI_SUCCESS || finished != 0) {
      chunk.request = MPI_REQUEST_NULL;  // MPI frees a request that completes, in error or not
      engine_.give_back_budget(chunk.size);
    }
    check_mpi(code, fmt::format("bytes {}..{}", chunk.offset, chunk.offset + chunk.size));
    if (finished == 0) continue;
    if (message_.direction == Direction::kReceive) check_received_size(status, chunk);
    ++completions_;
  }
  std::erase_if(posted_, [](const PostedChunk& chunk) { return chunk.request == MPI_REQUEST_NULL; });
}

void ChunkedRequest::post_chunks() {
  // A zero-byte message still travels, as one empty chunk, so it matches.
  while (next_offset_ < message_.size || !posted_any_) {
    const size_t size = std::min(chunk_bytes_, message_.size - next_offset_);
    if (!engine_.take_budget(size, posted_.empty())) return;
    PostedChunk chunk{MPI_REQUEST_NULL, next_offset_, size};
    std::byte* start = message_.data + next_offset_;
    const int count = static_cast<int>(size);
    const int code = message_.direction == Direction::kSend
                         ? MPI_Isend(start, count, MPI_BYTE, message_.peer, message_.mpi_tag, message_.comm,
                                     &chunk.request)
                         : MPI_Irecv(start, count, MPI_BYTE, message_.peer, message_.mpi_tag, message_.comm,
                                     &chunk.request);
    if (code != MPI_SUCCESS) engine_.give_back_budget(size);
    check_mpi(code, fmt::format("posting bytes {}..{}", chunk.offset, chunk.offset + size));
    posted_.push_back(chunk);
    next_offset_ += size;
    posted_any_ = true;
  }
}

void ChunkedRequest::check_received_size(const MPI_Status& status, const PostedChunk& chunk) const {
  int count = 0;
  check_mpi(MPI_Get_count(&status, MPI_BYTE, &count), "reading a received size");
  if (count < 0 || static_cast<size_t>(count) != chunk.size) {
    throw Error(ErrorCode::kTransport,
                fmt::format("bytes {}..{}: the sender sent {} bytes where {} were expected (do both sides agree "
                            "on the message size?)",
                            chunk.offset, chunk.offset + chunk.size, count, chunk.size));
  }
}

void ChunkedRequest::cancel_posted() noexcept {
  for (PostedChunk& chunk : posted_) {
    if (chunk.request == MPI_REQUEST_NULL) continue;
    // A receive can be withdrawn; a send is left to finish on its own.
    if (message_.direction == Direction::kReceive) MPI_Cancel(&chunk.request);
    MPI_Request_free(&chunk.request);
    engine_.give_back_budget(chunk.size);
  }
  posted_.clear();
}

void ChunkedRequest::throw_if_failed() const {
  if (error_) throw *error_;
}

std::string ChunkedRequest::describe() const {
  return message_.direction == Direction::kSend
             ? fmt::format("sending {} bytes to rank {} (tag {})", message_.size, message_.peer, message_.tag)
             : fmt::format("receiving {} bytes from rank {} (tag {})", message_.size, message_.peer,
                           message_.tag);
}

}  // namespace reshard::mpi_detail
