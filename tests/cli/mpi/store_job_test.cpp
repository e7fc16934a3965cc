// The command line as one job of 4 processes writing into the object-store
// test servers: a file of many parts gets parts from every process in one
// upload (none uploads the whole file) and equals the single-process local
// export; a checkpoint read from the store exports as the local one does;
// convert and import read from the store and write into it as they do local
// files; a rank killed mid-upload fails the job, naming it, and the survivors
// abort the uploads, so that nothing appears and nothing stays pending.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "reshard/formats/safetensors_writer.h"
#include "reshard/storage/open_store.h"
#include "storage/support/fault_proxy_process.h"
#include "storage/support/object_listing.h"
#include "storage/support/store_servers.h"
#include "support/temp_dir.h"

namespace reshard {
namespace {

using testing::objects_under;
using testing::files_under;

namespace fs = std::filesystem;
using ::testing::HasSubstr;

struct Job {
  int exit_status = -1;
  std::string out;
  std::string err;
};

// Runs `command` through the shell, stdout and stderr kept apart.
Job run(const std::string& command, const fs::path& scratch) {
  const fs::path err_path = scratch / "stderr.txt";
  Job job;
  FILE* pipe = popen(fmt::format("{} 2>{}", command, err_path.string()).c_str(), "r");
  if (pipe == nullptr) return job;
  std::array<char, 4096> block{};
  while (size_t n = fread(block.data(), 1, block.size(), pipe)) job.out.append(block.data(), n);
  const int status = pclose(pipe);
  job.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::ifstream err(err_path);
  std::ostringstream text;
  text << err.rdbuf();
  job.err = text.str();
  return job;
}

std::string mpirun(int ranks, const std::string& args) {
  // LeakSanitizer's exit-time scan crashes in processes that mpirun starts.
  return fmt::format("OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ASAN_OPTIONS=detect_leaks=0 "
                     "timeout -k 5 240 {} -np {} --oversubscribe {} {}",
                     RESHARD_MPIEXEC, ranks, RESHARD_BINARY, args);
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

class StoreJob : public ::testing::Test {
 protected:
  // A checkpoint of 6 tensors, 22.5 MiB: one weight file of 5 parts of 5 MiB.
  static void SetUpTestSuite() {
    testing::point_environment_at_servers();
    scratch_ = new testing::TempDir();
    std::mt19937_64 rng(20261204);
    std::vector<std::vector<float>> values(6, std::vector<float>(512 * 1920));
    std::vector<safetensors::TensorData> tensors;
    for (size_t i = 0; i < values.size(); ++i) {
      for (float& v : values[i]) v = static_cast<float>(rng() % 100000) / 1000.0f;
      tensors.push_back({{fmt::format("w{}", i), DType::kF32, {512, 1920}}, std::as_bytes(std::span(values[i]))});
    }
    safetensors::write_file(dir() / "model.safetensors", tensors);
    std::ofstream(dir() / "map.json") << R"({"rules": [{"from": "{name}", "to": "{name}"}]})";
    const Job convert = run(fmt::format("{} convert {} {} --mesh data=4 --best-effort data", RESHARD_BINARY,
                                        (dir() / "model.safetensors").string(), (dir() / "ckpt").string()),
                            dir());
    ASSERT_EQ(convert.exit_status, 0) << convert.err;
    const Job local = run(fmt::format("{} export {} {} --map {}", RESHARD_BINARY, (dir() / "ckpt").string(),
                                      (dir() / "local").string(), (dir() / "map.json").string()),
                          dir());
    ASSERT_EQ(local.exit_status, 0) << local.err;
  }
  static void TearDownTestSuite() { delete scratch_; }
  static fs::path dir() { return scratch_->path(); }

  std::string export_args(const std::string& out) const {
    return fmt::format("export {} {} --map {} --part-size 5MiB --json --timeout 10", (dir() / "ckpt").string(), out,
                       (dir() / "map.json").string());
  }

  static storage::Location prefix(const std::string& scheme) {
    const std::string bucket =
        scheme == "s3" ? testing::s3_server().buckets.at(0) : testing::gcs_server().buckets.at(0);
    return storage::Location::parse(fmt::format("{}://{}/{}", scheme, bucket, testing::unique_prefix()));
  }

  static inline testing::TempDir* scratch_ = nullptr;
};

TEST_F(StoreJob, FourProcessesUploadThePartsOfOneFileTogether) {
  for (const std::string scheme : {"s3", "gs"}) {
    const storage::Location out = prefix(scheme);
    const Job job = run(mpirun(4, export_args(out.str())), dir());
    ASSERT_EQ(job.exit_status, 0) << job.err;
    const nlohmann::json report = nlohmann::json::parse(job.out);
    const uint64_t total = report["bytes"].get<uint64_t>();
    uint64_t sum = 0;
    ASSERT_EQ(report["processes"].size(), 4u) << report;
    for (const auto& process : report["processes"]) {
      const uint64_t bytes = process["bytes_written"].get<uint64_t>();
      EXPECT_GT(bytes, 0u) << scheme << ": a process uploaded no part: " << report;
      EXPECT_LT(bytes, total) << scheme << ": a process uploaded the whole file: " << report;
      sum += bytes;
    }
    EXPECT_EQ(sum, total) << "every byte uploaded once";

    const auto store = storage::open_store(out);
    const storage::Location file = out.child("model.safetensors");
    EXPECT_EQ(store->read_all(file, uint64_t{1} << 30), read_file(dir() / "local" / "model.safetensors")) << scheme;
    std::vector<std::string> names;
    for (const auto& entry : store->list(out)) names.push_back(entry.name);
    EXPECT_EQ(names, std::vector<std::string>{"model.safetensors"}) << scheme << ": components or staging left";
    EXPECT_EQ(store->abort_stale_uploads(file), 0u) << scheme << ": an upload was left pending";
  }
}

TEST_F(StoreJob, FourProcessesExportACheckpointThatIsInTheStore) {
  const storage::Location root = prefix("s3");
  const auto store = storage::open_store(root);
  // Uploaded as a save leaves it: the data files, the manifest last.
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir() / "ckpt")) files.push_back(entry.path());
  std::stable_partition(files.begin(), files.end(), [](const fs::path& file) { return file.filename() != "manifest.json"; });
  for (const fs::path& file : files) {
    store->write_all(root.child("ckpt").child(file.filename().string()), read_file(file), storage::IfExists::kFail);
  }
  const storage::Location out = root.child("hf");
  const Job job = run(mpirun(4, fmt::format("export {} {} --map {} --part-size 5MiB --timeout 10",
                                            root.child("ckpt").str(), out.str(), (dir() / "map.json").string())),
                      dir());
  ASSERT_EQ(job.exit_status, 0) << job.err;
  EXPECT_EQ(store->read_all(out.child("model.safetensors"), uint64_t{1} << 30),
            read_file(dir() / "local" / "model.safetensors"));
}

// convert and import as one job of 4 processes, from the store into the store:
// each object equals the file the same command writes locally.
TEST_F(StoreJob, FourProcessesConvertAndImportFromTheStoreIntoIt) {
  for (const std::string scheme : {"s3", "gs"}) {
    const storage::Location root = prefix(scheme);
    const auto store = storage::open_store(root);
    for (const auto& [name, bytes] : files_under(dir() / "local")) {
      store->write_all(root.child("hf").child(name), bytes, storage::IfExists::kFail);
    }
    const Job convert = run(mpirun(4, fmt::format("convert {} {} --dtype bf16 --part-size 5MiB --timeout 10",
                                                  root.child("hf").str(), root.child("bf16").str())),
                            dir());
    ASSERT_EQ(convert.exit_status, 0) << scheme << ": " << convert.err;
    const fs::path local_bf16 = dir() / (scheme + "-bf16");
    const Job local_convert = run(fmt::format("{} convert {} {} --dtype bf16", RESHARD_BINARY,
                                              (dir() / "local").string(), local_bf16.string()),
                                  dir());
    ASSERT_EQ(local_convert.exit_status, 0) << local_convert.err;
    EXPECT_EQ(objects_under(root.child("bf16")), files_under(local_bf16)) << scheme;

    const std::string import_args = fmt::format("--map {} --mesh data=4 --best-effort data --part-size 5MiB --timeout 10",
                                                (dir() / "map.json").string());
    const Job imported = run(mpirun(4, fmt::format("import {} {} {}", root.child("hf").str(),
                                                   root.child("ckpt").str(), import_args)),
                             dir());
    ASSERT_EQ(imported.exit_status, 0) << scheme << ": " << imported.err;
    const fs::path local_ckpt = dir() / (scheme + "-ckpt");
    const Job local_import = run(mpirun(4, fmt::format("import {} {} {}", (dir() / "local").string(),
                                                       local_ckpt.string(), import_args)),
                                 dir());
    ASSERT_EQ(local_import.exit_status, 0) << local_import.err;
    EXPECT_EQ(objects_under(root.child("ckpt")), files_under(local_ckpt)) << scheme;
  }
}

// The process of rank `rank` among the children of `mpirun` that run reshard.
pid_t find_rank(int rank, const std::string& marker) {
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string command = read_file(entry.path() / "cmdline");
    const std::string program = command.substr(0, command.find('\0'));
    if (command.find(marker) == std::string::npos || !program.ends_with("/reshard")) continue;
    const std::string environ = read_file(entry.path() / "environ");
    if (environ.find(fmt::format("OMPI_COMM_WORLD_RANK={}", rank) + '\0') != std::string::npos) {
      return static_cast<pid_t>(std::stol(name));
    }
  }
  return -1;
}

TEST_F(StoreJob, ARankKilledMidUploadLeavesNoObjectAndNoPendingUpload) {
  // Parts reach the server through a proxy that holds every part upload for
  // 3 seconds: long enough to kill rank 0, the process that started the
  // uploads, while its peers still wait on theirs.
  const testing::FaultProxyProcess proxy(testing::s3_server().endpoint);
  proxy.add_rule({{"method", "PUT"}, {"path", "partNumber="}, {"kind", "delay"}, {"seconds", 3}, {"times", nullptr}});
  const storage::Location out = prefix("s3");
  const std::string marker = out.str();
  const std::string command = fmt::format("AWS_ENDPOINT_URL={} {}", proxy.url(), mpirun(4, export_args(marker)));
  Job job;
  std::thread runner([&] { job = run(command, dir()); });
  // The proxy logs a request once it has answered it: the first part is
  // through, the others are held.
  pid_t victim = -1;
  nlohmann::json log;
  for (int tries = 0; tries < 150 && victim < 0; ++tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    log = proxy.log();
    for (const auto& request : log) {
      if (request.value("path", "").find("partNumber=") != std::string::npos) victim = find_rank(0, marker);
    }
  }
  if (victim > 0) ::kill(victim, SIGKILL);
  const auto killed_at = std::chrono::steady_clock::now();
  runner.join();
  ASSERT_GT(victim, 0) << "rank 0 was not found while it uploaded\n" << log.dump() << "\n" << job.err;
  const auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
  EXPECT_NE(job.exit_status, 0) << job.err;
  EXPECT_THAT(job.err, HasSubstr("rank 0")) << "the failure does not name the killed rank";
  EXPECT_LT(seconds, 60) << "the job took long to end after the kill";

  const auto store = storage::open_store(out);
  EXPECT_TRUE(store->list(out).empty()) << "something appeared at " << out.str();
  EXPECT_EQ(store->abort_stale_uploads(out.child("model.safetensors")), 0u)
      << "the survivors left an upload pending\n" << job.err;
}

// An S3 server of the test's own, which it may kill; stopped when it goes.
class OwnS3Server {
 public:
  explicit OwnS3Server(const fs::path& scratch) : state_(scratch / "own-s3.json") {
    const Job start = run(servers("start --only s3"), scratch);
    if (start.exit_status != 0) throw std::runtime_error("cannot start an S3 server: " + start.err);
    std::ifstream in(state_);
    const nlohmann::json state = nlohmann::json::parse(in);
    endpoint_ = state["s3"]["endpoint"].get<std::string>();
    pid_ = state["s3"]["pid"].get<pid_t>();
  }
  ~OwnS3Server() { (void)std::system(servers("stop").c_str()); }
  OwnS3Server(const OwnS3Server&) = delete;
  OwnS3Server& operator=(const OwnS3Server&) = delete;

  const std::string& endpoint() const { return endpoint_; }
  void kill() const { ::kill(pid_, SIGKILL); }
  // The same server again, on the data it had.
  bool restart() const { return std::system(servers("restart-s3").c_str()) == 0; }

 private:
  std::string servers(const std::string& command) const {
    return fmt::format("{} {}/store_servers.py {} --state {}", RESHARD_STORAGE_TEST_PYTHON,
                       RESHARD_STORAGE_TEST_SERVERS, command, state_.string());
  }

  fs::path state_;
  std::string endpoint_;
  pid_t pid_ = -1;
};

TEST_F(StoreJob, AServerKilledMidUploadFailsEveryProcessWithinTheTimeoutAndNoObjectAppears) {
  const OwnS3Server server(dir());
  // Parts are held 2 seconds on their way, so that the server dies under them.
  const testing::FaultProxyProcess proxy(server.endpoint());
  proxy.add_rule({{"method", "PUT"}, {"path", "partNumber="}, {"kind", "delay"}, {"seconds", 2}, {"times", nullptr}});
  const storage::Location out = prefix("s3");
  const std::string command =
      fmt::format("AWS_ENDPOINT_URL={} {}", proxy.url(),
                  mpirun(4, fmt::format("export {} {} --map {} --part-size 5MiB --timeout 5", (dir() / "ckpt").string(),
                                        out.str(), (dir() / "map.json").string())));
  Job job;
  std::thread runner([&] { job = run(command, dir()); });
  bool uploading = false;
  for (int tries = 0; tries < 150 && !uploading; ++tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    for (const auto& request : proxy.log()) {
      uploading = uploading || request.value("path", "").find("partNumber=") != std::string::npos;
    }
  }
  if (uploading) server.kill();
  const auto killed_at = std::chrono::steady_clock::now();
  runner.join();
  ASSERT_TRUE(uploading) << "no part upload started\n" << job.err;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
  EXPECT_NE(job.exit_status, 0);
  EXPECT_THAT(job.err, HasSubstr("error: "));
  EXPECT_LT(seconds, 5 + 40) << "the job outlived its --timeout by far\n" << job.err;

  ASSERT_TRUE(server.restart());
  storage::StoreOptions options;
  options.s3_endpoint = server.endpoint();
  options.timeout = std::chrono::seconds(10);
  EXPECT_TRUE(storage::open_store(out, options)->list(out).empty()) << "an object appeared after the restart";
}

}  // namespace
}  // namespace reshard
