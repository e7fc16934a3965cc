#include "chunked_request.h"

#include <algorithm>
#include <memory>
#include <chrono>
#include <thread>

#include <fmt/format.h>

#include "mpi_error.h"

namespace reshard::mpi_detail {
namespace {

// How long a cancelled request waits for chunks already on the move.
constexpr auto kCancelGrace = std::chrono::milliseconds(100);

}  // namespace

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
    if (done()) engine_.count_completed(message_.direction == Direction::kSend, message_.size);
  } catch (const Error& e) {
    error_ = e.with_context(fmt::format("rank {}: {}", engine_.rank(), describe()));
    cancel_posted();
  }
}

void ChunkedRequest::complete_finished_chunks() {
  for (PostedChunk& chunk : posted_) {
    int finished = 0;
    const int code = MPI_Test(&chunk.request, &finished, MPI_STATUS_IGNORE);
    if (code != MPI_SUCCESS || finished != 0) {
      chunk.request = MPI_REQUEST_NULL;  // MPI frees a request that completes, in error or not
      engine_.give_back_budget(chunk.size);
    }
    check_mpi(code, fmt::format("bytes {}..{}", chunk.offset, chunk.offset + chunk.size));
    if (finished == 0) continue;
    ++completions_;
  }
  std::erase_if(posted_, [](const PostedChunk& chunk) { return chunk.request == MPI_REQUEST_NULL; });
}

bool ChunkedRequest::shares_channel_with(const ChunkedRequest& other) const {
  return message_.direction == other.message_.direction && message_.peer == other.message_.peer &&
         message_.comm == other.message_.comm && message_.mpi_tag == other.message_.mpi_tag;
}

void ChunkedRequest::post_chunks() {
  if (predecessor != nullptr && !predecessor->fully_posted()) return;
  predecessor = nullptr;
  // A zero-byte message still travels, as one empty chunk, so it matches.
  while (next_offset_ < message_.size || !posted_any_) {
    const size_t size = std::min(chunk_bytes_, message_.size - next_offset_);
    if (!engine_.take_budget(size, posted_.empty())) return;
    PostedChunk chunk{MPI_REQUEST_NULL, next_offset_, size};
    std::byte* start = message_.data + next_offset_;
    const int count = static_cast<int>(size);
    int code = MPI_SUCCESS;
    if (message_.direction == Direction::kSend) {
      code = MPI_Isend(start, count, MPI_BYTE, message_.peer, message_.mpi_tag, message_.comm, &chunk.request);
    } else {
      std::optional<MPI_Message> arrived;
      try {
        arrived = match_arrived_chunk(chunk);
      } catch (...) {
        engine_.give_back_budget(size);
        throw;
      }
      if (!arrived) {
        engine_.give_back_budget(size);
        return;
      }
      code = MPI_Imrecv(start, count, MPI_BYTE, &*arrived, &chunk.request);
    }
    if (code != MPI_SUCCESS) engine_.give_back_budget(size);
    check_mpi(code, fmt::format("posting bytes {}..{}", chunk.offset, chunk.offset + size));
    posted_.push_back(chunk);
    next_offset_ += size;
    posted_any_ = true;
  }
}

std::optional<MPI_Message> ChunkedRequest::match_arrived_chunk(const PostedChunk& chunk) {
  int arrived = 0;
  MPI_Message message = MPI_MESSAGE_NULL;
  MPI_Status status;
  check_mpi(MPI_Improbe(message_.peer, message_.mpi_tag, message_.comm, &arrived, &message, &status),
            fmt::format("probing for bytes {}..{}", chunk.offset, chunk.offset + chunk.size));
  if (arrived == 0) return std::nullopt;
  int count = 0;
  check_mpi(MPI_Get_count(&status, MPI_BYTE, &count), "reading an arriving message's size");
  if (count >= 0 && static_cast<size_t>(count) == chunk.size) return message;
  // Take the stray message off the wire into a buffer of its own size, kept
  // alive by the engine, so that it can neither overrun this request's buffer
  // nor be matched by a later receive.
  auto stray = std::make_shared<std::vector<std::byte>>(static_cast<size_t>(std::max(count, 0)));
  MPI_Request drain = MPI_REQUEST_NULL;
  if (MPI_Imrecv(stray->data(), count, MPI_BYTE, &message, &drain) == MPI_SUCCESS) MPI_Request_free(&drain);
  engine_.keep_alive_locked(stray);
  throw Error(ErrorCode::kTransport,
              fmt::format("bytes {}..{}: the sender sent {} bytes where {} were expected (do both sides agree on "
                          "the message size?)",
                          chunk.offset, chunk.offset + chunk.size, count, chunk.size));
}

void ChunkedRequest::cancel_posted() noexcept {
  // Posted chunks are matched (receives are posted only for messages that
  // arrived) and moving bytes of a buffer the caller is about to free. Give
  // them a moment to finish; past that they are abandoned to MPI, which is
  // safe only because a failed job is about to end.
  const auto deadline = std::chrono::steady_clock::now() + kCancelGrace;
  for (PostedChunk& chunk : posted_) {
    int finished = 0;
    while (chunk.request != MPI_REQUEST_NULL && std::chrono::steady_clock::now() < deadline) {
      if (MPI_Test(&chunk.request, &finished, MPI_STATUS_IGNORE) != MPI_SUCCESS) break;
      if (finished == 0) std::this_thread::yield();
    }
    if (chunk.request != MPI_REQUEST_NULL) MPI_Request_free(&chunk.request);
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
