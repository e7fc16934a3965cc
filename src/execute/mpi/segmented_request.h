// SegmentedRequest: one send or receive, carried as a train of bounded MPI messages.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "progress_engine.h"
#include "reshard/execute/transport.h"
#include "reshard/layout/error.h"

namespace reshard::mpi_detail {

enum class Direction { kSend, kReceive };

// The whole message a request moves, and where.
struct SegmentedMessage {
  Direction direction = Direction::kSend;
  int peer = 0;
  Tag tag = 0;       // reshard's tag, for messages
  MPI_Comm comm{};   // where the tag maps
  int mpi_tag = 0;
  std::byte* data = nullptr;  // read-only for sends
  size_t size = 0;
  // Keeps `data` alive while MPI may touch it; null when the caller keeps it
  // alive only while the request lives (the request then moves the bytes
  // through a copy of its own, which MPI may keep after a failure).
  std::shared_ptr<const void> owner;
};

// Segments go in order on one (communicator, peer, tag): MPI never lets
// messages of one such triple overtake each other, so segment i of the sender
// matches segment i of the receiver (which probes for it, so a segment of the
// wrong size is an error, never an overrun). Several requests on the same triple and
// direction post their segments one request after the other (each waits for its
// predecessor to have posted everything), so both sides post in the same order
// and messages arrive in the order they were started. The next segments are
// posted as earlier ones complete, within the engine's bytes-in-flight budget;
// a request always keeps one segment posted, so every request keeps moving
// whatever the others hold.
//
// A request that ends (or fails) while segments are still in MPI's hands
// leaves them to Orphans with a share of the message's memory, so that
// memory goes back only once MPI is done with it, whatever failed.
class SegmentedRequest final : public Request {
 public:
  // Registers with the engine and posts the first segments; the engine's lock
  // must be held. `segment_bytes` is at most INT_MAX.
  SegmentedRequest(ProgressEngine& engine, SegmentedMessage message, size_t segment_bytes);
  ~SegmentedRequest() override;
  SegmentedRequest(const SegmentedRequest&) = delete;
  SegmentedRequest& operator=(const SegmentedRequest&) = delete;

  void wait() override;
  bool test() override;

  // Under the engine's lock: completes finished segments and posts the next.
  // An MPI error is kept and thrown by the next wait() or test().
  void advance();

  // Whether `other` travels on the same (communicator, peer, tag) the same way.
  bool shares_channel_with(const SegmentedRequest& other) const;
  // Every segment has been handed to MPI (or the request failed).
  bool fully_posted() const { return error_.has_value() || (posted_any_ && next_offset_ == message_.size); }
  // The earlier request on the same channel that must post first, if any.
  SegmentedRequest* predecessor = nullptr;

 private:
  struct PostedSegment {
    MPI_Request request = MPI_REQUEST_NULL;
    size_t offset = 0;
    size_t size = 0;
  };

  bool done() const { return posted_any_ && next_offset_ == message_.size && posted_.empty(); }
  void complete_finished_segments();
  void post_segments();
  // The message carrying `segment` if it has arrived. Receives are posted only
  // for arrived messages of the expected size (MPI_Improbe, MPI_Imrecv): a
  // larger one must never meet a smaller buffer, as Open MPI's single-copy
  // path overruns the buffer instead of reporting truncation. A message of
  // the wrong size throws Error(kTransport).
  std::optional<MPI_Message> match_arrived_segment(const PostedSegment& segment);
  // Hands posted segments MPI has not finished to Orphans.
  void orphan_posted() noexcept;
  void throw_if_failed() const;
  // "receiving 4096 bytes from rank 2 (tag 7)"
  std::string describe() const;

  ProgressEngine& engine_;
  SegmentedMessage message_;
  std::byte* caller_data_ = nullptr;  // where a received copy goes, when the request copies
  size_t segment_bytes_;
  size_t next_offset_ = 0;
  bool posted_any_ = false;
  uint64_t completions_ = 0;  // segments completed, for progress tracking
  std::vector<PostedSegment> posted_;
  std::optional<Error> error_;
};

}  // namespace reshard::mpi_detail
