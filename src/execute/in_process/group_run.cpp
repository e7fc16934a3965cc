// InProcessGroup::run: a job whose processes are threads of this one, its
// failures handed back as a launcher would report them.
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "reshard/execute/in_process_transport.h"
#include "reshard/layout/error.h"

namespace reshard {
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

struct RankFailure {
  int rank = 0;
  std::exception_ptr error;
};

// Rethrows `failure`, an Error named by its rank.
[[noreturn]] void rethrow(const RankFailure& failure) {
  try {
    std::rethrow_exception(failure.error);
  } catch (const Error& e) {
    throw e.with_context(fmt::format("rank {}", failure.rank));
  }
}

}  // namespace

void InProcessGroup::run(const std::function<void(Transport& transport)>& body) {
  std::mutex mutex;
  std::optional<RankFailure> first_failure, first_root_cause;
  {
    std::vector<std::jthread> threads;
    for (int rank = 0; rank < size(); ++rank) {
      threads.emplace_back([&, rank] {
        try {
          body(transport(rank));
          leave(rank);  // what is left to wait on it for would never come
        } catch (...) {
          const std::exception_ptr error = std::current_exception();
          {
            const std::lock_guard lock(mutex);
            if (!first_failure) first_failure = RankFailure{rank, error};
            if (!first_root_cause && !is_peer_failure(error)) first_root_cause = RankFailure{rank, error};
          }
          mark_failed(rank, describe(error));
        }
      });
    }
  }
  if (first_root_cause) rethrow(*first_root_cause);
  if (first_failure) rethrow(*first_failure);
}

}  // namespace reshard
