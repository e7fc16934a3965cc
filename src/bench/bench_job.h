// What the file benchmarks share when their processes run as one job: a
// collective timer and a scratch folder every process sees by the same name.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "reshard/execute/transport.h"
#include "reshard/layout/error.h"

namespace reshard::bench {

// Seconds of `f` on this process, all processes starting together and the
// last one's end counting (the collectives inside end together). Starts from
// no dirty pages: earlier writes must not slow this one.
template <typename F>
double timed(Transport& transport, F&& f) {
  ::sync();
  transport.barrier();
  const auto start = std::chrono::steady_clock::now();
  f();
  transport.barrier();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Rank 0's scratch folder "reshard-bench-<label>-XXXXXX", shared by name
// (the processes share a file system). Collective.
inline std::filesystem::path shared_scratch(Transport& transport, std::string_view label) {
  std::string mine;
  if (transport.rank() == 0) {
    std::string pattern = (std::filesystem::temp_directory_path() / fmt::format("reshard-bench-{}-XXXXXX", label)).string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw Error(ErrorCode::kIo, fmt::format("bench {}: cannot create a folder", label));
    }
    mine = pattern;
  }
  const auto all = transport.all_gather(std::as_bytes(std::span(mine)));
  return std::filesystem::path(std::string(reinterpret_cast<const char*>(all[0].data()), all[0].size()));
}

}  // namespace reshard::bench
