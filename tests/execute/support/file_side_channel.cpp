#include "execute/support/file_side_channel.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <utility>

#include <fmt/format.h>

namespace reshard::testing {

FileSideChannel::FileSideChannel(std::string folder, int ranks)
    : folder_(std::move(folder)), consumed_(static_cast<size_t>(ranks), 0) {}

std::string FileSideChannel::event_path(int rank, int number) const {
  return fmt::format("{}/to-{}-{}", folder_, rank, number);
}

void FileSideChannel::notify(int rank) {
  for (int number = 0;; ++number) {
    const int fd = ::open(event_path(rank, number).c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
    if (fd >= 0) {
      ::close(fd);
      return;
    }
    if (errno != EEXIST) throw std::runtime_error(fmt::format("side channel: cannot create {}", event_path(rank, number)));
  }
}

void FileSideChannel::await(int self) {
  int& consumed = consumed_.at(static_cast<size_t>(self));
  const std::string path = event_path(self, consumed);
  // Polled: the waits it serves are hundreds of milliseconds long.
  while (::access(path.c_str(), F_OK) != 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ++consumed;
}

}  // namespace reshard::testing
