// `mpirun -np P reshard import` runs as one job: each rank reads its devices'
// slices and writes its part, one commits, and the checkpoint holds the same
// bytes as a one-process import; a folder that does not fit fails the job.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "job_runner.h"
#include "pipelines/support/hf_llama_folder.h"
#include "reshard/formats/safetensors_reader.h"

namespace {

namespace fs = std::filesystem;

using reshard::testing::bytes_of;
using Result = reshard::testing::JobResult;

Result run(int ranks, const std::string& args) { return reshard::testing::run_reshard_job(ranks, args); }
using reshard::safetensors::TensorSpec;

class ImportJob : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / fmt::format("reshard-import-job-{}", ::getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::mt19937_64 rng(11);
    for (const TensorSpec& spec : reshard::testing::hf_llama_specs(dims_)) {
      bytes_[spec.name] = reshard::testing::random_values(spec, rng);
      specs_[spec.name] = spec;
    }
    reshard::testing::write_hf_model_folder(dir_ / "hf", reshard::testing::hf_llama_specs(dims_), bytes_, 5000,
                                            reshard::testing::hf_llama_config_json(dims_));
    std::ofstream(dir_ / "rules.txt") << "embeddings.*  model,data\n*.q_proj.weight  None,model,data\n"
                                         "*.mlp.*_proj.weight  P(None, ('data', 'model'))\n";
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string import_args(const std::string& folder, const std::string& checkpoint) const {
    return fmt::format("import {} {} --map levanter-llama --mesh data=2,model=2 --devices 2,0,3,1 --rules {}",
                       (dir_ / folder).string(), (dir_ / checkpoint).string(), (dir_ / "rules.txt").string());
  }

  fs::path dir_;
  reshard::testing::LlamaDims dims_;
  reshard::testing::TensorBytes bytes_;
  std::map<std::string, TensorSpec> specs_;
};

TEST_F(ImportJob, UnderMpirunTheCheckpointEqualsAOneProcessImport) {
  Result result = run(0, import_args("hf", "ck1"));
  ASSERT_EQ(result.exit_status, 0) << result.err;
  result = run(0, fmt::format("convert {} {}", (dir_ / "ck1").string(), (dir_ / "one.safetensors").string()));
  ASSERT_EQ(result.exit_status, 0) << result.err;
  // The one-process import is the map's elements, checked by hand.
  const auto file = reshard::safetensors::File::open(dir_ / "one.safetensors");
  for (const auto& info : file.tensors()) {
    EXPECT_EQ(reshard::testing::mismatch_with_hf(info.name, reshard::Box::whole(reshard::safetensors::layout_shape(info.shape, info.name)),
                                                 file.view(info), info.dtype, bytes_, specs_, dims_),
              "");
  }
  for (int ranks : {2, 4}) {
    const std::string ck = fmt::format("ck{}", ranks);
    result = run(ranks, import_args("hf", ck));
    ASSERT_EQ(result.exit_status, 0) << ranks << " ranks: " << result.err;
    const fs::path out = dir_ / fmt::format("{}.safetensors", ck);
    result = run(0, fmt::format("convert {} {}", (dir_ / ck).string(), out.string()));
    ASSERT_EQ(result.exit_status, 0) << result.err;
    EXPECT_EQ(bytes_of(out), bytes_of(dir_ / "one.safetensors")) << ranks << " ranks";
  }
}

TEST_F(ImportJob, AFolderThatDoesNotFitFailsTheJobAndWritesNothing) {
  std::vector<TensorSpec> specs;
  for (const TensorSpec& spec : reshard::testing::hf_llama_specs(dims_)) {
    if (spec.name != "model.layers.1.mlp.down_proj.weight") specs.push_back(spec);
  }
  reshard::testing::write_hf_model_folder(dir_ / "gap", specs, bytes_, 5000, reshard::testing::hf_llama_config_json(dims_));
  const Result result = run(2, import_args("gap", "ck"));
  EXPECT_NE(result.exit_status, 0);
  EXPECT_NE(result.err.find("error: "), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("down_proj"), std::string::npos) << result.err;
  EXPECT_FALSE(fs::exists(dir_ / "ck"));
}

}  // namespace
