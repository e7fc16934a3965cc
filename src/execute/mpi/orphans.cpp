#include "orphans.h"

#include <algorithm>
#include <thread>

namespace reshard::mpi_detail {
namespace {

bool mpi_running() {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized != 0 && finalized == 0;
}

}  // namespace

Orphans& Orphans::instance() {
  static Orphans orphans;
  return orphans;
}

void Orphans::adopt(MPI_Request request, std::shared_ptr<const void> owner, bool cancellable) {
  const std::lock_guard guard(mutex_);
  orphans_.push_back(Orphan{request, std::move(owner), cancellable});
}

void Orphans::keep_until_finalized(std::shared_ptr<const void> owner) {
  const std::lock_guard guard(mutex_);
  kept_.push_back(std::move(owner));
}

void Orphans::reap() noexcept {
  std::unique_lock guard(mutex_, std::try_to_lock);
  if (!guard.owns_lock() || orphans_.empty() || !mpi_running()) return;
  std::erase_if(orphans_, [](Orphan& orphan) {
    int finished = 0;
    // An error also ends the request: MPI frees it and lets go of the memory.
    const int code = MPI_Test(&orphan.request, &finished, MPI_STATUS_IGNORE);
    return code != MPI_SUCCESS || finished != 0;
  });
}

size_t Orphans::size() const {
  const std::lock_guard guard(mutex_);
  return orphans_.size();
}

void Orphans::cancel_all(std::chrono::milliseconds patience) noexcept {
  {
    const std::lock_guard guard(mutex_);
    if (orphans_.empty() || !mpi_running()) return;
    for (Orphan& orphan : orphans_) {
      if (orphan.cancellable) MPI_Cancel(&orphan.request);
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + patience;
  while (size() > 0 && std::chrono::steady_clock::now() < deadline) {
    reap();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void Orphans::forget_all() noexcept {
  std::vector<Orphan> released;
  std::vector<std::shared_ptr<const void>> kept;
  {
    const std::lock_guard guard(mutex_);
    released.swap(orphans_);
    kept.swap(kept_);
  }
  // Owners go back outside the lock: one may free memory that holds another.
}

}  // namespace reshard::mpi_detail
