// `reshard export | inspect | convert` of an Orbax, Levanter or JAX checkpoint:
// the same command line handed to `python -m reshard.orbax` (here a stand-in
// interpreter that prints what it was given), or, without an interpreter, the
// exact command to run; every other source stays the binary's own.
#include <cstdlib>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "cli/support/run_reshard.h"

namespace reshard::testing {
namespace {

namespace fs = std::filesystem;

class PythonHandoffTest : public ::testing::Test {
 protected:
  void SetUp() override {
    write_bytes(folder_ / "python", "#!/bin/sh\necho \"handed: $*\"\n");
    fs::permissions(folder_ / "python", fs::perms::owner_all);
    ::setenv("RESHARD_PYTHON", (folder_ / "python").c_str(), 1);
  }
  void TearDown() override { ::unsetenv("RESHARD_PYTHON"); }

  TempFolder folder_;
};

TEST_F(PythonHandoffTest, EachKindIsHandedOverWithItsFlags) {
  fs::create_directories(folder_ / "levanter" / "model" / "w");
  write_bytes(folder_ / "levanter" / "metadata.json", R"({"step": 3})");
  fs::create_directories(folder_ / "orbax" / "default");
  write_bytes(folder_ / "orbax" / "default" / "_METADATA", "{}");
  fs::create_directories(folder_ / "jax" / "params" / "a");
  write_bytes(folder_ / "jax" / "params" / "a" / ".zarray", "{}");
  for (const std::string kind : {"levanter", "orbax", "jax"}) {
    const std::string source = (folder_ / kind).string();
    const CommandResult run = run_reshard({"export", "--map", "levanter-llama", source, "out", "--subtree",
                                           "train_state.model", "--max-shard-size", "5GB", "--merge-lora"});
    EXPECT_EQ(run.exit_code, 0) << kind << ": " << run.err;
    EXPECT_EQ(run.out, "handed: -m reshard.orbax export --map levanter-llama " + source +
                           " out --subtree train_state.model --max-shard-size 5GB --merge-lora\n")
        << kind;
  }
  EXPECT_EQ(run_reshard({"inspect", (folder_ / "jax").string()}).out,
            "handed: -m reshard.orbax inspect " + (folder_ / "jax").string() + "\n");
}

TEST_F(PythonHandoffTest, OtherSourcesStayTheBinarysOwn) {
  fs::create_directories(folder_ / "ckpt");
  write_bytes(folder_ / "ckpt" / "manifest.json", "{}");
  const CommandResult run = run_reshard({"export", (folder_ / "ckpt").string(), "out", "--map", "levanter-llama"});
  EXPECT_EQ(run.out.find("handed"), std::string::npos) << run.out;
  EXPECT_NE(run.exit_code, 0);
  EXPECT_EQ(run_reshard({"inspect", (folder_ / "missing").string()}).out.find("handed"), std::string::npos);
}

TEST_F(PythonHandoffTest, WithoutAnInterpreterTheCommandToRunIsSaid) {
  fs::create_directories(folder_ / "levanter");
  write_bytes(folder_ / "levanter" / "metadata.json", R"({"step": 3})");
  ::setenv("RESHARD_PYTHON", (folder_ / "no-such-python").c_str(), 1);
  const CommandResult run = run_reshard({"inspect", (folder_ / "levanter").string(), "--json"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("a Levanter checkpoint"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("no-such-python -m reshard.orbax inspect " + (folder_ / "levanter").string() + " --json"),
            std::string::npos)
      << run.err;
}

}  // namespace
}  // namespace reshard::testing
