#include "run_ranks.h"

#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "reshard/layout/error.h"

namespace reshard::in_process {
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

// Whether `failure` only reports another rank's failure (kPeerFailed).
bool is_peer_failure(const std::exception_ptr& failure) {
  try {
    std::rethrow_exception(failure);
  } catch (const Error& e) {
    return e.code() == ErrorCode::kPeerFailed;
  } catch (...) {
    return false;
  }
}

}  // namespace

void run_ranks(InProcessGroup& group, const std::function<void(Transport&)>& body) {
  std::mutex mutex;
  std::exception_ptr first_failure, first_root_cause;
  {
    std::vector<std::jthread> threads;
    for (int rank = 0; rank < group.size(); ++rank) {
      threads.emplace_back([&, rank] {
        try {
          body(group.transport(rank));
          group.leave(rank);  // what is left to wait on it for would never come
        } catch (...) {
          {
            const std::lock_guard lock(mutex);
            if (!first_failure) first_failure = std::current_exception();
            if (!first_root_cause && !is_peer_failure(std::current_exception())) {
              first_root_cause = std::current_exception();
            }
          }
          group.mark_failed(rank, describe(std::current_exception()));
        }
      });
    }
  }
  if (first_root_cause) std::rethrow_exception(first_root_cause);
  if (first_failure) std::rethrow_exception(first_failure);
}

}  // namespace reshard::in_process
