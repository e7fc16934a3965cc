#include "segmented_request.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include <fmt/format.h>

#include "mpi_error.h"
#include "orphans.h"

namespace reshard::mpi_detail {

SegmentedRequest::SegmentedRequest(ProgressEngine& engine, SegmentedMessage message, size_t segment_bytes)
    : engine_(engine), message_(std::move(message)), segment_bytes_(segment_bytes) {
  if (!message_.owner && message_.size > 0) {
    // Nothing keeps the caller's bytes alive past this request, but MPI may
    // hold a segment past it: move the bytes through memory of our own.
    auto copy = std::make_shared_for_overwrite<std::byte[]>(message_.size);
    if (message_.direction == Direction::kSend) {
      std::memcpy(copy.get(), message_.data, message_.size);
    } else {
      caller_data_ = message_.data;
    }
    message_.data = copy.get();
    message_.owner = std::move(copy);
  }
  engine_.add(this);
  advance();
}

SegmentedRequest::~SegmentedRequest() {
  auto guard = engine_.lock();
  orphan_posted();
  engine_.remove(this);
}

void SegmentedRequest::wait() {
  uint64_t seen = completions_;
  engine_.wait(WaitFor{[&] {
                         throw_if_failed();
                         if (done()) return WaitStep::kDone;
                         const bool progressed = completions_ != seen;
                         seen = completions_;
                         return progressed ? WaitStep::kProgressed : WaitStep::kIdle;
                       },
                       [&] { return describe(); }, [&] { return std::vector<int>{message_.peer}; }});
}

bool SegmentedRequest::test() {
  auto guard = engine_.lock();
  engine_.throw_if_aborted();
  engine_.progress();
  throw_if_failed();
  if (done()) return true;
  engine_.throw_if_peer_failed();
  engine_.throw_if_peer_gone({message_.peer}, std::chrono::steady_clock::duration::zero(),
                             [&] { return describe(); });
  return false;
}

void SegmentedRequest::advance() {
  if (error_ || done()) return;
  try {
    complete_finished_segments();
    post_segments();
    if (done()) engine_.count_completed(message_.direction == Direction::kSend, message_.size);
  } catch (const Error& e) {
    error_ = e.with_context(fmt::format("rank {}: {}", engine_.rank(), describe()));
    orphan_posted();
  }
}

void SegmentedRequest::complete_finished_segments() {
  for (PostedSegment& segment : posted_) {
    int finished = 0;
    const int code = MPI_Test(&segment.request, &finished, MPI_STATUS_IGNORE);
    if (code != MPI_SUCCESS || finished != 0) {
      segment.request = MPI_REQUEST_NULL;  // MPI frees a request that completes, in error or not
      engine_.give_back_budget(segment.size);
    }
    check_mpi(code, fmt::format("bytes {}..{}", segment.offset, segment.offset + segment.size));
    if (finished == 0) continue;
    if (caller_data_ != nullptr) std::memcpy(caller_data_ + segment.offset, message_.data + segment.offset, segment.size);
    ++completions_;
    engine_.note_completion();
  }
  std::erase_if(posted_, [](const PostedSegment& segment) { return segment.request == MPI_REQUEST_NULL; });
}

bool SegmentedRequest::shares_channel_with(const SegmentedRequest& other) const {
  return message_.direction == other.message_.direction && message_.peer == other.message_.peer &&
         message_.comm == other.message_.comm && message_.mpi_tag == other.message_.mpi_tag;
}

void SegmentedRequest::post_segments() {
  if (predecessor != nullptr && !predecessor->fully_posted()) return;
  predecessor = nullptr;
  // A zero-byte message still travels, as one empty segment, so it matches.
  while (next_offset_ < message_.size || !posted_any_) {
    const size_t size = std::min(segment_bytes_, message_.size - next_offset_);
    if (!engine_.take_budget(size, posted_.empty())) return;
    PostedSegment segment{MPI_REQUEST_NULL, next_offset_, size};
    std::byte* start = message_.data + next_offset_;
    const int count = static_cast<int>(size);
    int code = MPI_SUCCESS;
    if (message_.direction == Direction::kSend) {
      code = MPI_Isend(start, count, MPI_BYTE, message_.peer, message_.mpi_tag, message_.comm, &segment.request);
    } else {
      std::optional<MPI_Message> arrived;
      try {
        arrived = match_arrived_segment(segment);
      } catch (...) {
        engine_.give_back_budget(size);
        throw;
      }
      if (!arrived) {
        engine_.give_back_budget(size);
        return;
      }
      code = MPI_Imrecv(start, count, MPI_BYTE, &*arrived, &segment.request);
    }
    if (code != MPI_SUCCESS) engine_.give_back_budget(size);
    check_mpi(code, fmt::format("posting bytes {}..{}", segment.offset, segment.offset + size));
    posted_.push_back(segment);
    next_offset_ += size;
    posted_any_ = true;
  }
}

std::optional<MPI_Message> SegmentedRequest::match_arrived_segment(const PostedSegment& segment) {
  int arrived = 0;
  MPI_Message message = MPI_MESSAGE_NULL;
  MPI_Status status;
  check_mpi(MPI_Improbe(message_.peer, message_.mpi_tag, message_.comm, &arrived, &message, &status),
            fmt::format("probing for bytes {}..{}", segment.offset, segment.offset + segment.size));
  if (arrived == 0) return std::nullopt;
  int count = 0;
  check_mpi(MPI_Get_count(&status, MPI_BYTE, &count), "reading an arriving message's size");
  if (count >= 0 && static_cast<size_t>(count) == segment.size) return message;
  // Take the stray message off the wire into a buffer of its own size, kept
  // alive by the engine, so that it can neither overrun this request's buffer
  // nor be matched by a later receive.
  auto stray = std::make_shared<std::vector<std::byte>>(static_cast<size_t>(std::max(count, 0)));
  MPI_Request drain = MPI_REQUEST_NULL;
  if (MPI_Imrecv(stray->data(), count, MPI_BYTE, &message, &drain) == MPI_SUCCESS) {
    Orphans::instance().adopt(drain, std::move(stray));
  }
  throw Error(ErrorCode::kTransport,
              fmt::format("bytes {}..{}: the sender sent {} bytes where {} were expected (do both sides agree on "
                          "the message size?)",
                          segment.offset, segment.offset + segment.size, count, segment.size));
}

void SegmentedRequest::orphan_posted() noexcept {
  // Posted segments are matched (receives are posted only for messages that
  // arrived) and moving bytes the request is about to let go of: MPI may
  // still read or write them, so they stay alive until it is done.
  for (PostedSegment& segment : posted_) {
    if (segment.request == MPI_REQUEST_NULL) continue;  // completed, budget given back
    int finished = 0;
    if (MPI_Test(&segment.request, &finished, MPI_STATUS_IGNORE) == MPI_SUCCESS && finished == 0) {
      try {
        Orphans::instance().adopt(segment.request, message_.owner);
      } catch (...) {
        // Out of memory for the list: keep the bytes forever rather than free them under MPI.
        new std::shared_ptr<const void>(message_.owner);
      }
    }
    engine_.give_back_budget(segment.size);
  }
  posted_.clear();
}

void SegmentedRequest::throw_if_failed() const {
  if (error_) throw *error_;
}

std::string SegmentedRequest::describe() const {
  return message_.direction == Direction::kSend
             ? fmt::format("sending {} bytes to rank {} (tag {})", message_.size, message_.peer, message_.tag)
             : fmt::format("receiving {} bytes from rank {} (tag {})", message_.size, message_.peer,
                           message_.tag);
}

}  // namespace reshard::mpi_detail
