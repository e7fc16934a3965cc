// The command line as one job without mpirun: 4 processes started by a plain
// loop with torchrun's environment (RANK, WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT) run demo, export, import and convert as one job over the TCP
// transport, and write what `mpirun -np 4` writes, byte for byte.
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace {

namespace fs = std::filesystem;

struct JobRun {
  int status = -1;
  std::string output;  // stdout and stderr of every process
};

JobRun shell(const std::string& command) {
  JobRun run;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return run;
  char block[4096];
  while (size_t n = fread(block, 1, sizeof block, pipe)) run.output.append(block, n);
  const int status = pclose(pipe);
  run.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

// `reshard ARGS` in `dir` as 4 processes of a job: under mpirun, or started
// one by one with torchrun's variables (and no MPI's), each bounded in time;
// the status is the worst of the four.
// `last_rank_args` go to rank 3 alone, `other_ranks_args` to the others.
JobRun run_job(bool torchrun, const fs::path& dir, const std::string& args, const std::string& last_rank_args = "",
               const std::string& other_ranks_args = "") {
  if (!torchrun) {
    return shell(fmt::format("cd {} && OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
                             "ASAN_OPTIONS=detect_leaks=0 timeout -k 5 180 {} -np 4 --oversubscribe {} {}",
                             dir.string(), RESHARD_MPIEXEC, RESHARD_BINARY, args));
  }
  const int port = free_port();
  return shell(fmt::format(
      "cd {} && status=0; pids=; for rank in 0 1 2 3; do "
      "RANK=$rank LOCAL_RANK=$rank WORLD_SIZE=4 LOCAL_WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 MASTER_PORT={} "
      "RESHARD_LOG=debug timeout -k 5 180 {} {} $([ $rank = 3 ] && echo '{}' || echo '{}') > out.$rank 2>&1 & pids=\"$pids $!\"; "
      "done; for p in $pids; do wait $p || status=$?; done; cat out.0 out.1 out.2 out.3; rm -f out.?; exit $status",
      dir.string(), port, RESHARD_BINARY, args, last_rank_args, other_ranks_args));
}

// Every file under `root`, by relative path, with its bytes.
std::map<std::string, std::string> files_under(const fs::path& root) {
  std::map<std::string, std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    files[fs::relative(entry.path(), root).string()] = bytes.str();
  }
  return files;
}

void expect_same_tree(const fs::path& a, const fs::path& b) {
  const auto left = files_under(a), right = files_under(b);
  ASSERT_FALSE(left.empty()) << a;
  std::vector<std::string> left_names, right_names;
  for (const auto& [name, bytes] : left) left_names.push_back(name);
  for (const auto& [name, bytes] : right) right_names.push_back(name);
  ASSERT_EQ(left_names, right_names);
  for (const auto& [name, bytes] : left) EXPECT_TRUE(bytes == right.at(name)) << name << " differs";
}

class TorchrunCli : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(::testing::TempDir()) / fmt::format("torchrun_cli_{}", ::getpid());
    fs::remove_all(root_);
    fs::create_directories(root_ / "mpirun");
    fs::create_directories(root_ / "torchrun");
  }
  void TearDown() override { fs::remove_all(root_); }

  // Runs `args` both ways, each in its own folder; both must succeed.
  void run_both(const std::string& args) {
    const JobRun mpi = run_job(false, root_ / "mpirun", args);
    ASSERT_EQ(mpi.status, 0) << "mpirun: " << args << "\n" << mpi.output;
    const JobRun tcp = run_job(true, root_ / "torchrun", args);
    ASSERT_EQ(tcp.status, 0) << "torchrun's environment: " << args << "\n" << tcp.output;
    last_tcp_output_ = tcp.output;
  }

  fs::path root_;
  std::string last_tcp_output_;
};

TEST_F(TorchrunCli, DemoExportImportAndConvertMatchMpirunByteForByte) {
  ASSERT_NO_FATAL_FAILURE(run_both("demo --out d --json"));
  // Each rank said which transport it joined, and rank 0 printed the one JSON document.
  EXPECT_NE(last_tcp_output_.find("transport tcp (rendezvous torchrun at 127.0.0.1:"), std::string::npos)
      << last_tcp_output_;
  EXPECT_NE(last_tcp_output_.find("\"job\":{\"transport\":\"tcp\",\"rendezvous\":\"torchrun\",\"processes\":4}"),
            std::string::npos)
      << last_tcp_output_;
  expect_same_tree(root_ / "mpirun/d", root_ / "torchrun/d");

  ASSERT_NO_FATAL_FAILURE(run_both("export d/checkpoint exported --map levanter-llama --max-shard-size 200KB"));
  expect_same_tree(root_ / "mpirun/exported", root_ / "torchrun/exported");
  ASSERT_NO_FATAL_FAILURE(run_both("import d/merged imported --map levanter-llama --mesh data=2,model=2 --best-effort model"));
  expect_same_tree(root_ / "mpirun/imported", root_ / "torchrun/imported");
  ASSERT_NO_FATAL_FAILURE(run_both("convert d/checkpoint converted --mesh model=4 --best-effort model"));
  expect_same_tree(root_ / "mpirun/converted", root_ / "torchrun/converted");
}

// A rank that fails on its own ends the whole job: before the rendezvous
// (the others then name it as missing), or after it (they fail naming it,
// at once). Every process exits, within the timeout.
TEST_F(TorchrunCli, ARankThatFailsEndsTheJob) {
  ASSERT_NO_FATAL_FAILURE(run_both("demo --out d"));
  const fs::path dir = root_ / "torchrun";
  const auto start = std::chrono::steady_clock::now();
  JobRun run = run_job(true, dir, "export d/checkpoint exported --timeout 3", "--map no-such-map.json",
                       "--map levanter-llama");
  EXPECT_NE(run.status, 0) << run.output;
  EXPECT_NE(run.output.find("no-such-map.json"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("rank(s) 3 did not arrive"), std::string::npos) << run.output;
  EXPECT_FALSE(fs::exists(dir / "exported"));

  // Rank 3 alone asks for another layout: it fails after the rendezvous.
  run = run_job(true, dir, "convert d/checkpoint converted --timeout 30 --mesh model=4 --best-effort model",
                "--dtype bf16");
  EXPECT_NE(run.status, 0) << run.output;
  EXPECT_NE(run.output.find("the processes do not save the same tensors"), std::string::npos) << run.output;
  EXPECT_FALSE(fs::exists(dir / "converted"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(25)) << run.output;
}

}  // namespace
