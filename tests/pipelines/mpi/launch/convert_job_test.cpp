// `mpirun -np P reshard convert` runs as one job: the ranks share the
// reading and the writing, one commits, and the output equals one process's.

#include <array>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "job_runner.h"
#include "reshard/formats/safetensors_writer.h"

namespace {

namespace fs = std::filesystem;

using reshard::testing::bytes_of;
using Result = reshard::testing::JobResult;

Result run(int ranks, const std::string& args) { return reshard::testing::run_reshard_job(ranks, args); }

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
      std::vector<std::byte> b(static_cast<size_t>(n) * reshard::element_bytes(spec.dtype));
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
