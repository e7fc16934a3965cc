// Runs the built `reshard` binary as a subprocess and captures what it says.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace reshard::testing {

struct CommandResult {
  int exit_code = -1;  // the process's exit status; 128 + N when killed by signal N
  std::string out;     // everything written to stdout
  std::string err;     // everything written to stderr
};

// Limits to run the binary under, to make it fail on purpose.
struct RunLimits {
  // RLIMIT_FSIZE: writing past this many bytes of a file fails with EFBIG
  // (SIGXFSZ is ignored, so the process sees an I/O error, not a signal).
  std::optional<uint64_t> max_file_bytes;
};

// Runs RESHARD_BINARY with `args` (stdin from /dev/null) and waits for it.
CommandResult run_reshard(const std::vector<std::string>& args, const RunLimits& limits = {});

// Peak resident memory (KiB, the child's ru_maxrss from wait4) of
// RESHARD_BINARY run with `args` (stdout to /dev/null); -1 unless it exits 0.
long peak_rss_kib(const std::vector<std::string>& args);

// Waits for the child `pid` to end: its exit status, or 128 + N when killed by signal N.
int wait_for_exit(pid_t pid);

// A null-terminated argv for RESHARD_BINARY `args`..., pointing into `storage`,
// which must outlive it.
std::vector<char*> reshard_argv(const std::vector<std::string>& args, std::vector<std::string>& storage);

// A fresh folder under the system temp folder, removed with all in it.
class TempFolder {
 public:
  TempFolder();
  ~TempFolder();
  TempFolder(const TempFolder&) = delete;
  TempFolder& operator=(const TempFolder&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(std::string_view name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

// The whole file as a string of bytes.
std::string read_bytes(const std::filesystem::path& path);
void write_bytes(const std::filesystem::path& path, std::string_view bytes);

}  // namespace reshard::testing
