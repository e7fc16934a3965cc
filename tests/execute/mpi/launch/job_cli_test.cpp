// The command line as one job under mpirun: --processes defaults to the MPI
// world size, rank 0 alone prints, and a layout the job cannot hold is an
// error on every rank.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace {

const std::string kSeedPlan =
    "plan --shape 32,8,4096 --dtype f32 --src-mesh data=4,model=4 --src-devices 0,4,8,12,1,5,9,13,2,6,10,14,3,7,11,15 "
    "--src-spec data,model --dst-mesh data=4,model=4 --dst-devices 0,1,4,5,2,3,6,7,8,9,12,13,10,11,14,15 "
    "--dst-spec data,model --json";

struct CommandResult {
  int exit_status = -1;
  std::string stdout_text;
  std::string stderr_text;
};

// Runs `reshard ARGS`, under `mpirun -np RANKS` when ranks > 0, with the
// environment assignments `env` ("NAME=value ", which the ranks inherit).
CommandResult run_reshard(int ranks, const std::string& args, const std::string& env = "") {
  const std::string launcher =
      // LeakSanitizer's exit-time scan crashes in processes that mpirun starts
      // (MPI's own threads are still up), so the jobs run without it.
      env + (ranks > 0 ? fmt::format("OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ASAN_OPTIONS=detect_leaks=0 "
                              "timeout -k 5 120 {} -np {} "
                              "--oversubscribe ",
                              RESHARD_MPIEXEC, ranks)
                       : std::string());
  const std::string stderr_path = ::testing::TempDir() + "reshard_job_cli_stderr.txt";
  const std::string command = fmt::format("{}{} {} 2>{}", launcher, RESHARD_BINARY, args, stderr_path);
  CommandResult run;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    ADD_FAILURE() << "cannot start " << command;
    return run;
  }
  std::array<char, 4096> block{};
  while (size_t n = fread(block.data(), 1, block.size(), pipe)) run.stdout_text.append(block.data(), n);
  const int status = pclose(pipe);
  if (WIFEXITED(status)) run.exit_status = WEXITSTATUS(status);
  if (FILE* err = fopen(stderr_path.c_str(), "r")) {
    while (size_t n = fread(block.data(), 1, block.size(), err)) run.stderr_text.append(block.data(), n);
    fclose(err);
  }
  return run;
}

size_t count(const std::string& text, const std::string& needle) {
  size_t found = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++found;
  return found;
}

TEST(JobCli, ProcessesDefaultToTheWorldSizeAndRankZeroPrints) {
  const CommandResult job = run_reshard(4, kSeedPlan);
  ASSERT_EQ(job.exit_status, 0) << job.stderr_text;
  const CommandResult alone = run_reshard(0, kSeedPlan + " --processes 4");
  ASSERT_EQ(alone.exit_status, 0) << alone.stderr_text;
  // One JSON document (not one per rank), the plan of 4 processes.
  nlohmann::json plan;
  ASSERT_NO_THROW(plan = nlohmann::json::parse(job.stdout_text)) << job.stdout_text;
  // The job also says how its processes reach each other; the plan is the same.
  const nlohmann::json paths = plan["paths"];
  plan.erase("paths");
  EXPECT_EQ(plan, nlohmann::json::parse(alone.stdout_text));
  EXPECT_GT(plan["bytes_cross_process"].get<uint64_t>(), 0u);
  ASSERT_EQ(paths.size(), 4u) << paths;
  for (size_t from = 0; from < 4; ++from) {
    ASSERT_EQ(paths[from].size(), 4u) << paths;
    for (size_t to = 0; to < 4; ++to) {
      // One host, so a single copy wherever the kernel lets a process read another's memory
      // (by mapping its arena, or by the kernel copy).
      if (from == to) {
        EXPECT_EQ(paths[from][to], "self");
      } else {
        EXPECT_TRUE(paths[from][to] == "shared memory" || paths[from][to] == "single copy" ||
                    paths[from][to] == "MPI (attach refused)")
            << paths;
        EXPECT_EQ(paths[from][to], paths[to][from]) << "both ends of a pair agree";
      }
    }
  }
}

TEST(JobCli, ThePlanSaysWhenTheJobGoesThroughMpiAndWhy) {
  const CommandResult off = run_reshard(2, kSeedPlan + " --num-devices 16", "RESHARD_SINGLE_COPY=0 ");
  ASSERT_EQ(off.exit_status, 0) << off.stderr_text;
  const nlohmann::json paths = nlohmann::json::parse(off.stdout_text)["paths"];
  EXPECT_EQ(paths, nlohmann::json::parse(R"j([["self", "MPI (single copy off)"], ["MPI (single copy off)", "self"]])j"));
  const std::string text_plan = kSeedPlan.substr(0, kSeedPlan.size() - std::string(" --json").size());
  const CommandResult text = run_reshard(2, text_plan, "RESHARD_SINGLE_COPY=0 ");
  ASSERT_EQ(text.exit_status, 0) << text.stderr_text;
  EXPECT_NE(text.stdout_text.find("rank    1: MPI (single copy off) | self"), std::string::npos) << text.stdout_text;
  // Alone, there is no job to describe.
  const CommandResult alone = run_reshard(0, kSeedPlan + " --processes 2");
  EXPECT_FALSE(nlohmann::json::parse(alone.stdout_text).contains("paths"));
}

TEST(JobCli, ADeviceTheJobDoesNotHaveIsAnErrorOnEveryRank) {
  const CommandResult job = run_reshard(2, kSeedPlan + " --num-devices 8");
  EXPECT_NE(job.exit_status, 0);
  // Counted by the message itself: mpirun may interleave the ranks' writes.
  EXPECT_EQ(count(job.stderr_text, "8 devices (ids 0..7) leave out device"), 2u) << job.stderr_text;
}

TEST(JobCli, AWorldThatCannotSplitTheDevicesIsAnErrorOnEveryRank) {
  const CommandResult job = run_reshard(3, kSeedPlan);
  EXPECT_NE(job.exit_status, 0);
  EXPECT_EQ(count(job.stderr_text, "16 devices cannot be split evenly over 3 processes"), 3u) << job.stderr_text;
}

}  // namespace
