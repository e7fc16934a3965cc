#include "execute/support/side_channel.h"

namespace reshard::testing {

void ThreadSideChannel::notify(int rank) {
  {
    const std::lock_guard lock(mutex_);
    ++pending_.at(static_cast<size_t>(rank));
  }
  changed_.notify_all();
}

void ThreadSideChannel::await(int self) {
  std::unique_lock lock(mutex_);
  int& pending = pending_.at(static_cast<size_t>(self));
  changed_.wait(lock, [&] { return pending > 0; });
  --pending;
}

}  // namespace reshard::testing
