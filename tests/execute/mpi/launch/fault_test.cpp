// How an MPI job ends when one rank fails mid-transfer: the test starts
// `mpirun -np 3 mpi_fault_job MODE` and checks the exit status, that the job
// ended by itself (not killed by timeout(1) as hung), and that the output
// names the failed rank. How long it took is not checked: mpirun's start-up
// on busy cores varies too much for any bound to tell slow from wrong.
#include <sys/wait.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace {

struct JobResult {
  int exit_status = -1;  // -1 unless mpirun exited normally
  std::chrono::duration<double> elapsed{};
  std::string output;
};

JobResult run_fault_job(const std::string& mode) {
  const std::string command = fmt::format(
      "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout -k 5 120 {} -np 3 --oversubscribe {} {} 2>&1",
      RESHARD_MPIEXEC, RESHARD_FAULT_JOB, mode);
  JobResult result;
  const auto start = std::chrono::steady_clock::now();
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    ADD_FAILURE() << "cannot start " << command;
    return result;
  }
  std::array<char, 4096> block{};
  while (size_t n = fread(block.data(), 1, block.size(), pipe)) result.output.append(block.data(), n);
  const int status = pclose(pipe);
  result.elapsed = std::chrono::steady_clock::now() - start;
  if (WIFEXITED(status)) result.exit_status = WEXITSTATUS(status);
  std::cout << fmt::format("mode {}: exit status {} after {:.2f} s\n", mode, result.exit_status,
                           result.elapsed.count());
  return result;
}

void expect_failed_on_its_own(const JobResult& job) {
  EXPECT_NE(job.exit_status, 0) << job.output;
  EXPECT_NE(job.exit_status, 124) << "the job hung until timeout(1) killed it:\n" << job.output;
}

bool mentions(const JobResult& job, const std::string& text) {
  return job.output.find(text) != std::string::npos;
}

// A job whose rank 2 was killed mid-read ended by itself, non-zero, naming
// it, with no survivor finishing and no sanitizer report.
void expect_killed_rank_named(const JobResult& job) {
  expect_failed_on_its_own(job);
  EXPECT_TRUE(mentions(job, "rank 2")) << job.output;
  EXPECT_FALSE(mentions(job, "finished without a failure")) << job.output;
  EXPECT_FALSE(mentions(job, "AddressSanitizer")) << job.output;
  EXPECT_FALSE(mentions(job, "runtime error:")) << job.output;
}

TEST(MpiFault, ARankThatDiesWithoutAWordEndsTheJob) {
  // mpirun notices the process is gone and kills the job: the survivors
  // never get to time out. mpirun names the rank (in Open MPI's words).
  const JobResult job = run_fault_job("exit");
  expect_failed_on_its_own(job);
  EXPECT_TRUE(mentions(job, "process rank 2")) << job.output;
  EXPECT_FALSE(mentions(job, "finished without a failure")) << job.output;
}

TEST(MpiFault, ARankKilledWhileItsPeersReadItsMemoryEndsTheJobNamingIt) {
  // The readers' copy fails (the memory is gone) or mpirun sees the death
  // first: either way the job ends by itself, non-zero, naming rank 2, and
  // no survivor crashes (a sanitizer's report would say so).
  expect_killed_rank_named(run_fault_job("killed"));
}

TEST(MpiFault, ARankKilledWhileItsPeersCopyFromItsSharedMemoryEndsTheJobNamingIt) {
  // The message lives in rank 2's shared arena, which its peers have mapped:
  // its pages outlive it while mapped, so a reader's copy finishes (or
  // mpirun sees the death first), and the next wait names rank 2. No
  // survivor faults on the dead rank's memory, none finishes.
  expect_killed_rank_named(run_fault_job("killed-shared"));
}

TEST(MpiFault, ARankKilledWhileItWritesIntoItsPeersSharedMemoryEndsTheJobNamingIt) {
  // Its strided messages go into its peers' arenas, written by rank 2
  // itself: killed mid-write, the receivers wait for a "written" that never
  // comes, and the job ends (mpirun, or the liveness bound) naming rank 2;
  // no survivor crashes or finishes.
  expect_killed_rank_named(run_fault_job("killed-writing"));
}

TEST(MpiFault, ARankThatThrowsIsNamedByItsPeers) {
  const JobResult job = run_fault_job("throw");
  expect_failed_on_its_own(job);
  EXPECT_TRUE(mentions(job, "simulated failure mid-transfer")) << job.output;
  // At least one survivor reported the failure, naming the rank, before the
  // job was torn down.
  EXPECT_TRUE(mentions(job, "peer rank 2 failed")) << job.output;
}

TEST(MpiFault, ARankThatFallsSilentIsReportedWithinTheBoundNamingIt) {
  // Stopped, its heartbeats stop too: the survivors give up on it after the
  // 2 s bound, name it, and end the job (MPI_Abort also ends a stopped process).
  const JobResult job = run_fault_job("silent");
  expect_failed_on_its_own(job);
  EXPECT_TRUE(mentions(job, "rank 2 has been silent for")) << job.output;
  EXPECT_TRUE(mentions(job, "while receiving 1048576 bytes from rank 2")) << job.output;
}

TEST(MpiFault, ARankSlowerThanTheBoundButAliveIsWaitedFor) {
  // Paused for 6 s, three times the 2 s bound (the old rule, "no progress
  // for the timeout", failed it); its heartbeats say it is alive.
  const JobResult job = run_fault_job("slow");
  EXPECT_EQ(job.exit_status, 0) << job.output;
  EXPECT_FALSE(mentions(job, "error:")) << job.output;  // ranks' lines may interleave: no finer check
  EXPECT_GE(job.elapsed, std::chrono::seconds(6)) << job.output;  // it slept that long inside the job
}

}  // namespace
