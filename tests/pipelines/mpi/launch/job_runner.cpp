#include "job_runner.h"

#include <unistd.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <system_error>

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace reshard::testing {

namespace fs = std::filesystem;

std::string bytes_of(const fs::path& path) {
  std::string bytes(static_cast<size_t>(fs::file_size(path)), '\0');
  std::ifstream in(path, std::ios::binary);
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return bytes;
}

JobResult run_reshard_job(int ranks, const std::string& args) {
  const std::string launcher =
      ranks > 0 ? fmt::format("OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout -k 5 100 {} -np {} "
                              "--oversubscribe ",
                              RESHARD_MPIEXEC, ranks)
                : std::string();
  const std::string err_path = ::testing::TempDir() + fmt::format("reshard_job_stderr_{}.txt", ::getpid());
  const std::string command = fmt::format("{}{} {} >/dev/null 2>{}", launcher, RESHARD_BINARY, args, err_path);
  JobResult result;
  const int status = std::system(command.c_str());
  if (WIFEXITED(status)) result.exit_status = WEXITSTATUS(status);
  std::error_code ec;
  if (fs::exists(err_path, ec)) result.err = bytes_of(err_path);
  fs::remove(err_path, ec);
  return result;
}

}  // namespace reshard::testing
