#include "pipelines/common/small_file.h"

#include <cstdint>
#include <fstream>
#include <sstream>
#include <system_error>

#include <fmt/format.h>

#include "reshard/layout/error.h"

namespace reshard::pipelines_detail {

namespace {
constexpr uintmax_t kMaxConfigBytes = 10'000'000;  // real configs are kilobytes
}  // namespace

std::string read_small_file(const std::filesystem::path& path) {
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) throw Error(ErrorCode::kIo, fmt::format("{}: cannot read: {}", path.string(), ec.message()));
  if (size > kMaxConfigBytes) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: {} bytes is too large for a config", path.string(), size));
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  // Copying an empty file fails `text` too; only the file's own state says whether reading failed.
  if (!in.good() && !in.eof()) throw Error(ErrorCode::kIo, fmt::format("{}: cannot read", path.string()));
  return std::move(text).str();
}

}  // namespace reshard::pipelines_detail
