// `mpirun -np P reshard export` runs as one job: every rank writes its share
// (or streams it to rank 0 with --gather-to 0), one commits, and the folder
// is byte-identical to a one-process export.
#include <unistd.h>

#include <filesystem>
#include <map>
#include <random>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "job_runner.h"
#include "cli/support/levanter_file.h"

namespace {

namespace fs = std::filesystem;

using reshard::testing::bytes_of;
using Result = reshard::testing::JobResult;

Result run(int ranks, const std::string& args) { return reshard::testing::run_reshard_job(ranks, args); }

std::map<std::string, std::string> files_of(const fs::path& folder) {
  std::map<std::string, std::string> files;
  for (const auto& entry : fs::directory_iterator(folder)) files[entry.path().filename().string()] = bytes_of(entry.path());
  return files;
}

class ExportJob : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / fmt::format("reshard-export-job-{}", ::getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::mt19937_64 rng(11);
    reshard::testing::write_levanter_file(dir_ / "src.safetensors", rng, true);
    const Result result = run(0, fmt::format("convert {} {} --mesh data=2,model=2 --devices 0,2,1,3 --best-effort model",
                                             (dir_ / "src.safetensors").string(), ckpt()));
    ASSERT_EQ(result.exit_status, 0) << result.err;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string ckpt() const { return (dir_ / "ckpt").string(); }

  // Exports with `flags` at one process and at `ranks` under mpirun; the folders must match.
  void expect_same(int ranks, const std::string& flags) {
    const fs::path alone = dir_ / "alone", job = dir_ / "job";
    fs::remove_all(alone);
    fs::remove_all(job);
    Result result = run(0, fmt::format("export {} {} --map levanter-llama {}", ckpt(), alone.string(), flags));
    ASSERT_EQ(result.exit_status, 0) << result.err;
    result = run(ranks, fmt::format("export {} {} --map levanter-llama {}", ckpt(), job.string(), flags));
    ASSERT_EQ(result.exit_status, 0) << result.err;
    EXPECT_NE(result.err.find(fmt::format("with {} processes", ranks)), std::string::npos) << result.err;  // one job
    EXPECT_EQ(files_of(job), files_of(alone)) << ranks << " ranks, " << flags;
  }

  fs::path dir_;
};

TEST_F(ExportJob, ModelUnderMpirunIsByteIdentical) {
  expect_same(2, "--max-shard-size 10KB");
  expect_same(4, "--dtype bf16 --max-shard-size 10KB");
}

TEST_F(ExportJob, AdapterAndMergedUnderMpirunAreByteIdentical) {
  expect_same(2, "--adapter-only");
  expect_same(4, "--merge-lora");
  expect_same(2, "--merge-lora --gather-to 0 --max-shard-size 10KB");
}

TEST_F(ExportJob, AMapErrorFailsEveryRankAndWritesNothing) {
  const Result result = run(2, fmt::format("export {} {} --map levanter-llama --adapter-only --base {}", ckpt(),
                                           (dir_ / "out").string(), (dir_ / "src.safetensors").string()));
  EXPECT_EQ(result.exit_status, 1) << result.err;
  EXPECT_NE(result.err.find("error: "), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("adapter key 'base_model.model.model.layers.0."), std::string::npos) << result.err;
  EXPECT_FALSE(fs::exists(dir_ / "out"));
}

}  // namespace
