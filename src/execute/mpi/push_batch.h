// PushBatch: sends started together, and the copies within this process made in the same walk as their writes.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "polled_request.h"
#include "streaming_gather.h"

namespace reshard::mpi_detail {

class DirectSend;

// The sends of one isend_gather_all call: those that write into
// their receivers (DirectSend) write together, in one walk, so that the rows
// of a source shard that go to several receivers are read once, whole. The
// copies from those rows to this process's own shards join the first such
// walk: a shard's rows are then read in full and in order, which the
// hardware prefetchers follow (a strided pass over part of each row is
// several times slower than one over all of it).
struct PushBatch {
  std::vector<DirectSend*> members;
  // When a member first could write while others still waited for their
  // receivers' "where" (see DirectSend::holds_for_siblings).
  std::optional<std::chrono::steady_clock::time_point> first_ready;
  // Made (and cleared) by the first walk that writes, or by BatchCopies
  // once no member can write any more.
  std::vector<GatherJob> copies;
  int threads = 1;
};

// Done once the batch's copies are made. Made under the engine's lock, like
// every request of the transport, and advanced in its rounds; a copy left
// unmade when it is destroyed (a failed operation) is never made.
class BatchCopies final : public PolledRequest {
 public:
  BatchCopies(ProgressEngine& engine, std::shared_ptr<PushBatch> batch, uint64_t bytes);
  ~BatchCopies() override;
  BatchCopies(const BatchCopies&) = delete;
  BatchCopies& operator=(const BatchCopies&) = delete;


 private:
  bool advance() override;
  std::string describe() const override;
  // The peers whose "where" members still wait for.
  std::vector<int> waited_peers() const override;

  std::shared_ptr<PushBatch> batch_;
  const uint64_t bytes_;
};

}  // namespace reshard::mpi_detail
