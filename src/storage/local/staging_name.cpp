#include "storage/local/staging_name.h"

#include <signal.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <random>
#include <system_error>

#include <fmt/format.h>

namespace reshard::storage_detail {
namespace {

constexpr std::string_view kMarker = ".tmp-reshard-";

}  // namespace

const std::string& this_host() {
  static const std::string host = [] {
    std::array<char, 256> name{};
    if (::gethostname(name.data(), name.size() - 1) != 0 || name[0] == '\0') return std::string("localhost");
    return std::string(name.data());
  }();
  return host;
}

std::string new_staging_name(std::string_view final_name) {
  thread_local std::mt19937_64 random(std::random_device{}());
  return fmt::format(".{}{}{}-{}-{:08x}", final_name, kMarker, this_host(), ::getpid(),
                     static_cast<uint32_t>(random()));
}

std::optional<StagingOwner> staging_owner(std::string_view entry, std::string_view final_name) {
  const std::string prefix = fmt::format(".{}{}", final_name, kMarker);
  if (!entry.starts_with(prefix)) return std::nullopt;
  std::string_view rest = entry.substr(prefix.size());  // HOST-PID-NONCE
  const size_t nonce_dash = rest.rfind('-');
  if (nonce_dash == std::string_view::npos) return std::nullopt;
  const size_t pid_dash = rest.rfind('-', nonce_dash - 1);
  if (pid_dash == std::string_view::npos || nonce_dash == 0) return std::nullopt;
  StagingOwner owner;
  owner.host = std::string(rest.substr(0, pid_dash));
  const std::string_view pid = rest.substr(pid_dash + 1, nonce_dash - pid_dash - 1);
  const auto [end, error] = std::from_chars(pid.data(), pid.data() + pid.size(), owner.pid);
  if (error != std::errc() || end != pid.data() + pid.size() || owner.pid <= 0) return std::nullopt;
  return owner;
}

bool owner_is_dead(const StagingOwner& owner) {
  if (owner.host != this_host()) return false;
  return ::kill(static_cast<pid_t>(owner.pid), 0) != 0 && errno == ESRCH;
}

size_t remove_dead_stagings(const std::filesystem::path& final_path) {
  std::filesystem::path folder = final_path.parent_path();
  if (folder.empty()) folder = ".";
  const std::string name = final_path.filename().string();
  size_t removed = 0;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    const auto owner = staging_owner(it->path().filename().string(), name);
    if (!owner || !owner_is_dead(*owner)) continue;
    std::error_code ignored;
    if (std::filesystem::remove_all(it->path(), ignored) > 0) ++removed;
  }
  return removed;
}

}  // namespace reshard::storage_detail
