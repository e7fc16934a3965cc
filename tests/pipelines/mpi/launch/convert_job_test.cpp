// `mpirun -np P reshard convert` runs as one job: the ranks share the
// reading and the writing, one commits, and the output equals one process's.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "reshard/formats/safetensors_writer.h"

namespace {

namespace fs = std::filesystem;

std::string bytes_of(const fs::path& path) {
  std::string bytes(static_cast<size_t>(fs::file_size(path)), '\0');
  std::ifstream in(path, std::ios::binary);
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return bytes;
}

struct Result {
  int exit_status = -1;
  std::string err;
};

Result run(int ranks, const std::string& args) {
  const std::string launcher =
      ranks > 0 ? fmt::format("OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout -k 5 100 {} -np {} "
                              "--oversubscribe ",
                              RESHARD_MPIEXEC, ranks)
                : std::string();
  const std::string err_path = ::testing::TempDir() + "reshard_convert_job_stderr.txt";
  const std::string command = fmt::format("{}{} {} >/dev/null 2>{}", launcher, RESHARD_BINARY, args, err_path);
  Result result;
  const int status = std::system(command.c_str());
  if (WIFEXITED(status)) result.exit_status = WEXITSTATUS(status);
  std::error_code ec;
  if (fs::exists(err_path, ec)) result.err = bytes_of(err_path);
  return result;
}

class ConvertJob : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / fmt::format("reshard-convert-job-{}", ::getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::mt19937_64 rng(7);
    std::vector<std::vector<std::byte>> bytes;
    const std::vector<reshard::safetensors::TensorSpec> specs = {{"a", reshard::DType::kF32, {64, 33}},
                                                                 {"b", reshard::DType::kBF16, {7, 5}},
                                                                 {"c", reshard::DType::kI64, {}}};
    std::vector<reshard::safetensors::TensorData> data;
    for (const auto& spec : specs) {
      uint64_t n = 1;
      for (uint64_t d : spec.shape) n *= d;
      std::vector<std::byte> b(static_cast<size_t>(n) * static_cast<size_t>(reshard::dtype_bits(spec.dtype) / 8));
      for (std::byte& x : b) x = static_cast<std::byte>(rng() & 0xFF);
      bytes.push_back(std::move(b));
    }
    for (size_t i = 0; i < specs.size(); ++i) data.push_back({specs[i], bytes[i]});
    reshard::safetensors::write_file(dir_ / "src.safetensors", data);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(ConvertJob, FileToFileUnderMpirunIsByteIdentical) {
  for (int ranks : {2, 3}) {
    const fs::path out = dir_ / fmt::format("out{}.safetensors", ranks);
    const Result result = run(ranks, fmt::format("convert {} {}", (dir_ / "src.safetensors").string(), out.string()));
    ASSERT_EQ(result.exit_status, 0) << result.err;
    EXPECT_EQ(bytes_of(out), bytes_of(dir_ / "src.safetensors")) << ranks << " ranks";
  }
}

TEST_F(ConvertJob, ThroughACheckpointUnderMpirunIsByteIdentical) {
  const std::string src = (dir_ / "src.safetensors").string(), ck = (dir_ / "ck").string();
  Result result = run(2, fmt::format("convert {} {} --mesh x=2,y=2 --best-effort y", src, ck));
  ASSERT_EQ(result.exit_status, 0) << result.err;
  result = run(3, fmt::format("convert {} {} --mesh m=3 --best-effort m", ck, (dir_ / "ck3").string()));
  ASSERT_EQ(result.exit_status, 0) << result.err;
  result = run(2, fmt::format("convert {} {} --max-shard-size 3000", (dir_ / "ck3").string(), (dir_ / "hf").string()));
  ASSERT_EQ(result.exit_status, 0) << result.err;
  result = run(0, fmt::format("convert {} {}", (dir_ / "hf").string(), (dir_ / "back.safetensors").string()));
  ASSERT_EQ(result.exit_status, 0) << result.err;
  EXPECT_EQ(bytes_of(dir_ / "back.safetensors"), bytes_of(dir_ / "src.safetensors"));
}

}  // namespace
