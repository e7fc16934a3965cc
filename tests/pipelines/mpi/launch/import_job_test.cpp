// `mpirun -np P reshard import` runs as one job: each rank reads its devices'
// slices and writes its part, one commits, and the checkpoint holds the same
// bytes as a one-process import; a folder that does not fit fails the job.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "pipelines/support/hf_llama_folder.h"
#include "reshard/formats/safetensors_reader.h"

namespace {

namespace fs = std::filesystem;
using reshard::safetensors::TensorSpec;

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

// Runs the CLI alone (ranks 0) or under mpirun.
Result run(int ranks, const std::string& args) {
  const std::string launcher =
      ranks > 0 ? fmt::format("OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout -k 5 100 {} -np {} "
                              "--oversubscribe ",
                              RESHARD_MPIEXEC, ranks)
                : std::string();
  const std::string err_path = ::testing::TempDir() + fmt::format("reshard_import_job_stderr_{}.txt", ::getpid());
  const std::string command = fmt::format("{}{} {} >/dev/null 2>{}", launcher, RESHARD_BINARY, args, err_path);
  Result result;
  const int status = std::system(command.c_str());
  if (WIFEXITED(status)) result.exit_status = WEXITSTATUS(status);
  std::error_code ec;
  if (fs::exists(err_path, ec)) result.err = bytes_of(err_path);
  return result;
}

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
