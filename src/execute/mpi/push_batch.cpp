#include "push_batch.h"

#include <fmt/format.h>

#include "direct_request.h"

namespace reshard::mpi_detail {

BatchCopies::BatchCopies(ProgressEngine& engine, std::shared_ptr<PushBatch> batch, uint64_t bytes)
    : PolledRequest(engine, engine.rank()), batch_(std::move(batch)), bytes_(bytes) {
  // Advanced in every progress round: once every member has chosen to be
  // read, the copies are made during the exchange's next wait, not after it.
  engine_.add(this);
}

BatchCopies::~BatchCopies() {
  auto guard = engine_.lock();
  engine_.remove(this);
  batch_->copies.clear();
}

bool BatchCopies::advance() {
  if (!batch_->copies.empty()) {
    for (const DirectSend* member : batch_->members) {
      if (member->may_still_write()) return false;
    }
    gather_streaming(batch_->copies, batch_->threads);
    batch_->copies.clear();
  }
  done_ = true;
  return true;
}

std::string BatchCopies::describe() const {
  return fmt::format("copying {} bytes within rank {} with the sends that read the same rows", bytes_, engine_.rank());
}

std::vector<int> BatchCopies::waited_peers() const {
  std::vector<int> peers;
  for (const DirectSend* member : batch_->members) {
    if (member->may_still_write()) peers.push_back(member->peer());
  }
  return peers;
}

}  // namespace reshard::mpi_detail
