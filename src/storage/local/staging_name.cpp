#include "storage/local/staging_name.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
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

std::optional<unsigned long long> process_start(long pid) {
  const int fd = ::open(fmt::format("/proc/{}/stat", pid).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::array<char, 1024> buffer{};  // the line is a few hundred bytes; the start time comes early in it
  const ssize_t got = ::read(fd, buffer.data(), buffer.size());
  ::close(fd);
  if (got <= 0) return std::nullopt;
  const std::string_view stat(buffer.data(), static_cast<size_t>(got));
  // The command name, in parentheses, may hold spaces and ')': fields count from the last ')'.
  const size_t name_end = stat.rfind(')');
  if (name_end == std::string::npos) return std::nullopt;
  std::string_view rest = std::string_view(stat).substr(name_end + 1);
  constexpr int kFieldsBeforeStart = 19;  // fields 3 (the state) to 21; the start time is field 22
  for (int i = 0; i < kFieldsBeforeStart; ++i) {
    const size_t space = rest.find(' ', 1);
    if (space == std::string_view::npos) return std::nullopt;
    rest = rest.substr(space);
  }
  rest.remove_prefix(1);
  unsigned long long start = 0;
  const auto [end, error] = std::from_chars(rest.data(), rest.data() + rest.size(), start);
  if (error != std::errc() || end == rest.data()) return std::nullopt;
  return start;
}

std::string new_staging_name(std::string_view final_name) {
  thread_local std::mt19937_64 random(std::random_device{}());
  static const unsigned long long start = process_start(::getpid()).value_or(0);
  return fmt::format(".{}{}{}-{}.{}-{:08x}", final_name, kMarker, this_host(), ::getpid(), start,
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
  std::string_view pid = rest.substr(pid_dash + 1, nonce_dash - pid_dash - 1);  // PID or PID.START
  const size_t dot = pid.find('.');
  if (dot != std::string_view::npos) {
    const std::string_view start = pid.substr(dot + 1);
    unsigned long long value = 0;
    const auto [end, error] = std::from_chars(start.data(), start.data() + start.size(), value);
    if (error != std::errc() || end != start.data() + start.size()) return std::nullopt;
    owner.start = value;
    pid = pid.substr(0, dot);
  }
  const auto [end, error] = std::from_chars(pid.data(), pid.data() + pid.size(), owner.pid);
  if (error != std::errc() || end != pid.data() + pid.size() || owner.pid <= 0) return std::nullopt;
  return owner;
}

bool owner_is_dead(const StagingOwner& owner) {
  if (owner.host != this_host()) return false;
  if (::kill(static_cast<pid_t>(owner.pid), 0) != 0 && errno == ESRCH) return true;
  if (!owner.start) return false;
  // The id runs a process: the writer's, unless it started at another time (the id was reused).
  const auto start = process_start(owner.pid);
  return start && *start != *owner.start;
}

std::vector<std::filesystem::path> dead_stagings(const std::filesystem::path& final_path) {
  // "out/" names the folder "out": its staging sits beside "out".
  const std::filesystem::path path = final_path.has_filename() ? final_path : final_path.parent_path();
  std::filesystem::path folder = path.parent_path();
  if (folder.empty()) folder = ".";
  const std::string name = path.filename().string();
  std::vector<std::filesystem::path> dead;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    const auto owner = staging_owner(it->path().filename().string(), name);
    if (owner && owner_is_dead(*owner)) dead.push_back(it->path());
  }
  std::sort(dead.begin(), dead.end());
  return dead;
}

std::vector<std::filesystem::path> dead_stagings_in(const std::filesystem::path& folder) {
  std::vector<std::filesystem::path> dead;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string entry = it->path().filename().string();
    const size_t marker = entry.rfind(kMarker);
    if (entry.front() != '.' || marker == std::string::npos || marker < 2) continue;
    const auto owner = staging_owner(entry, std::string_view(entry).substr(1, marker - 1));
    if (owner && owner_is_dead(*owner)) dead.push_back(it->path());
  }
  std::sort(dead.begin(), dead.end());
  return dead;
}

size_t remove_dead_stagings(const std::filesystem::path& final_path) {
  size_t removed = 0;
  for (const std::filesystem::path& staging : dead_stagings(final_path)) {
    std::error_code ignored;
    if (std::filesystem::remove_all(staging, ignored) > 0) ++removed;
  }
  return removed;
}

}  // namespace reshard::storage_detail
