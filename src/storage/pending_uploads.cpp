#include "reshard/storage/pending_uploads.h"

#include <signal.h>
#include <unistd.h>

#include <future>
#include <map>
#include <mutex>
#include <thread>

namespace reshard::storage {
namespace {

struct Pending {
  std::shared_ptr<Store> store;
  Location object;
  PartLayout layout;
  std::string handle;
};

struct Registry {
  std::mutex mutex;
  std::map<uint64_t, Pending> uploads;
  uint64_t next = 1;
};

Registry& registry() {
  static Registry* instance = new Registry();  // never destroyed: a signal may come during exit
  return *instance;
}

int signal_pipe[2] = {-1, -1};

void on_signal(int number) {
  const unsigned char byte = static_cast<unsigned char>(number);
  (void)!::write(signal_pipe[1], &byte, 1);
}

void watch_signals() {
  unsigned char number = 0;
  while (::read(signal_pipe[0], &number, 1) != 1) {
  }
  abort_pending_uploads();
  ::signal(number, SIG_DFL);
  ::raise(number);
}

}  // namespace

uint64_t remember_pending_upload(std::shared_ptr<Store> store, const ParallelUpload& upload) {
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  const uint64_t id = r.next++;
  r.uploads.emplace(id, Pending{std::move(store), upload.destination(), upload.parts(), upload.handle()});
  return id;
}

void forget_pending_upload(uint64_t id) {
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  r.uploads.erase(id);
}

size_t abort_pending_uploads() noexcept {
  std::map<uint64_t, Pending> taken;
  {
    Registry& r = registry();
    const std::lock_guard lock(r.mutex);
    taken.swap(r.uploads);
  }
  size_t aborted = 0;
  for (auto& [id, pending] : taken) {
    try {
      pending.store->join_upload(pending.object, pending.layout, pending.handle)->abort();
      ++aborted;
    } catch (...) {
      // The store may be gone too; a later writer of the same object removes what is left.
    }
  }
  return aborted;
}

void abort_pending_uploads_on_termination() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (::pipe(signal_pipe) != 0) return;
    // Waited for until it runs: a thread still starting when a short command
    // exits leaves its start-up allocations behind, which LeakSanitizer reports.
    std::promise<void> running;
    std::future<void> started = running.get_future();
    std::thread([running = std::move(running)]() mutable {
      running.set_value();
      watch_signals();
    }).detach();
    started.wait();
    struct sigaction action {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    for (const int number : {SIGTERM, SIGINT, SIGHUP}) ::sigaction(number, &action, nullptr);
  });
}

}  // namespace reshard::storage
