#include "execute/support/rank_threads.h"

#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace reshard::testing {
namespace {

std::string describe(const std::exception_ptr& failure) {
  try {
    std::rethrow_exception(failure);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

}  // namespace

void run_ranks(InProcessGroup& group, const RankBody& body) {
  std::mutex mutex;
  std::exception_ptr first_failure;
  {
    std::vector<std::jthread> threads;
    for (int rank = 0; rank < group.size(); ++rank) {
      threads.emplace_back([&, rank] {
        try {
          body(group.transport(rank));
        } catch (...) {
          // Recorded before the group learns of it, so that the root cause,
          // not a peer's resulting kPeerFailed, is the failure rethrown.
          {
            const std::lock_guard lock(mutex);
            if (!first_failure) first_failure = std::current_exception();
          }
          group.mark_failed(rank, describe(std::current_exception()));
        }
      });
    }
  }
  if (first_failure) std::rethrow_exception(first_failure);
}

void run_ranks(int ranks, const RankBody& body, std::chrono::milliseconds timeout) {
  InProcessGroup group(ranks, timeout);
  run_ranks(group, body);
}

}  // namespace reshard::testing
