#include "peer_paths.h"

#include <unistd.h>

#include <cstdlib>
#include <string_view>
#include <vector>

#include <fmt/format.h>

namespace reshard {

std::string_view peer_path_name(PeerPath path) {
  switch (path) {
    case PeerPath::kSelf: return "self";
    case PeerPath::kSharedMemory: return "shared memory";
    case PeerPath::kSingleCopy: return "single copy";
    case PeerPath::kOtherHost: return "MPI (other host)";
    case PeerPath::kOptedOut: return "MPI (single copy off)";
    case PeerPath::kRefused: return "MPI (attach refused)";
  }
  return "unknown";
}

namespace mpi_detail {
namespace {

constexpr PeerPath kEveryPath[] = {PeerPath::kSharedMemory, PeerPath::kSingleCopy, PeerPath::kOtherHost,
                                   PeerPath::kOptedOut, PeerPath::kRefused};

// "rank 4" or "ranks 1-3, 5": consecutive ranks as ranges.
std::string rank_list(const std::vector<int>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size();) {
    size_t end = i;
    while (end + 1 < ranks.size() && ranks[end + 1] == ranks[end] + 1) ++end;
    if (i > 0) out += ", ";
    out += end == i ? fmt::format("{}", ranks[i]) : fmt::format("{}-{}", ranks[i], ranks[end]);
    i = end + 1;
  }
  return out;
}

}  // namespace

std::string describe_peer_paths(int rank, std::span<const PeerPath> paths) {
  std::string line = fmt::format("rank {} of {}:", rank, paths.size());
  bool first = true;
  for (const PeerPath path : kEveryPath) {
    std::vector<int> ranks;
    for (size_t j = 0; j < paths.size(); ++j) {
      if (paths[j] == path) ranks.push_back(static_cast<int>(j));
    }
    if (ranks.empty()) continue;
    line += fmt::format("{} {} with {}", first ? "" : ";", peer_path_name(path), rank_list(ranks));
    first = false;
  }
  if (first) line += " alone";
  return line;
}

void log_peer_paths(int rank, std::span<const PeerPath> paths) {
  const char* level = std::getenv("RESHARD_LOG");
  if (level == nullptr || std::string_view(level) != "debug") return;
  const std::string line = fmt::format("reshard: {}\n", describe_peer_paths(rank, paths));
  // One write, so that the ranks' lines do not interleave.
  [[maybe_unused]] const ssize_t written = ::write(STDERR_FILENO, line.data(), line.size());
}

}  // namespace mpi_detail
}  // namespace reshard
