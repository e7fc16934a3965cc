// A reshard checkpoint in an object store (the test servers) on the command
// line: `export` reads it (into a local folder or another store folder) and
// writes what it writes from the same checkpoint on a local disk; `inspect`
// and `verify` read it as they read the local one, and verify names the
// damaged object.
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/support/levanter_file.h"
#include "cli/support/run_reshard.h"
#include "reshard/formats/checkpoint_manifest.h"
#include "reshard/storage/open_store.h"
#include "storage/support/object_listing.h"
#include "storage/support/store_servers.h"
#include "support/seed.h"

namespace reshard {
namespace {

using testing::objects_under;
using testing::files_under;

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::run_reshard;
using testing::TempFolder;

class CheckpointInStore : public ::testing::TestWithParam<std::string> {
 protected:
  // A checkpoint of 4 devices made by `reshard convert` (its chunks split 4 ways),
  // uploaded as a save would leave it: the data files, then the manifest.
  void SetUp() override {
    testing::point_environment_at_servers();
    std::mt19937_64 rng = testing::seeded_rng();
    testing::write_levanter_file(dir_ / "src.safetensors", rng, true);
    const auto convert = run_reshard({"convert", (dir_ / "src.safetensors").string(), ckpt(), "--mesh",
                                      "data=2,model=2", "--devices", "0,2,1,3", "--best-effort", "model"});
    ASSERT_EQ(convert.exit_code, 0) << convert.err;
    const bool s3 = GetParam() == "s3";
    const std::string bucket = s3 ? testing::s3_server().buckets.at(0) : testing::gcs_server().buckets.at(0);
    remote_ = storage::Location::parse(fmt::format("{}://{}/{}", GetParam(), bucket, testing::unique_prefix()));
    const auto store = storage::open_store(remote_);
    const std::string manifest(checkpoint::kManifestFileName);
    for (const auto& [name, bytes] : files_under(dir_ / "ckpt")) {
      if (name != manifest) store->write_all(remote_.child("ckpt").child(name), bytes, storage::IfExists::kFail);
    }
    store->write_all(remote_.child("ckpt").child(manifest), testing::read_bytes(dir_ / "ckpt" / manifest),
                     storage::IfExists::kFail);
  }

  std::string ckpt() const { return (dir_ / "ckpt").string(); }
  std::string remote_ckpt() const { return remote_.child("ckpt").str(); }

  TempFolder dir_;
  storage::Location remote_;
};

TEST_P(CheckpointInStore, ExportReadsItAndWritesWhatTheLocalCheckpointGives) {
  const std::vector<std::string> options = {"--map", "levanter-llama", "--max-shard-size", "10KB"};
  auto with = [&](std::vector<std::string> args) {
    args.insert(args.end(), options.begin(), options.end());
    return run_reshard(args);
  };
  const auto local = with({"export", ckpt(), (dir_ / "local").string()});
  ASSERT_EQ(local.exit_code, 0) << local.err;
  const auto expected = files_under(dir_ / "local");
  ASSERT_TRUE(expected.contains("model.safetensors.index.json"));

  const auto to_local = with({"export", remote_ckpt(), (dir_ / "from-store").string()});
  ASSERT_EQ(to_local.exit_code, 0) << to_local.err;
  EXPECT_EQ(files_under(dir_ / "from-store"), expected);

  const auto to_store = with({"export", remote_ckpt(), remote_.child("hf").str(), "--part-size", "5MiB"});
  ASSERT_EQ(to_store.exit_code, 0) << to_store.err;
  EXPECT_EQ(objects_under(remote_.child("hf")), expected);
}

TEST_P(CheckpointInStore, InspectAndVerifyReadItAsTheLocalOne) {
  const auto local = run_reshard({"inspect", "--json", "--hash", ckpt()});
  const auto remote = run_reshard({"inspect", "--json", "--hash", remote_ckpt()});
  ASSERT_EQ(local.exit_code, 0) << local.err;
  ASSERT_EQ(remote.exit_code, 0) << remote.err;
  EXPECT_EQ(nlohmann::json::parse(remote.out)["format"], "checkpoint");
  EXPECT_EQ(nlohmann::json::parse(remote.out), nlohmann::json::parse(local.out));
  const auto text = run_reshard({"inspect", remote_ckpt()});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr(remote_ckpt() + ": "));
  EXPECT_THAT(text.out, HasSubstr("format checkpoint"));

  const auto verify = run_reshard({"verify", remote_ckpt()});
  ASSERT_EQ(verify.exit_code, 0) << verify.err;
  EXPECT_THAT(verify.out, HasSubstr("ok: " + remote_ckpt() + ": checkpoint"));
}

TEST_P(CheckpointInStore, VerifyNamesADamagedDataFileObject) {
  const storage::Location data = remote_.child("ckpt/data-00000.safetensors");
  const auto store = storage::open_store(data);
  std::string bytes = store->read_all(data, uint64_t{1} << 30);
  bytes.back() = static_cast<char>(bytes.back() ^ 0x01);  // a chunk byte: the header stays valid
  store->write_all(data, bytes, storage::IfExists::kReplace);
  const auto verify = run_reshard({"verify", remote_ckpt()});
  EXPECT_EQ(verify.exit_code, 1) << verify.out;
  EXPECT_THAT(verify.err, HasSubstr(data.str()));
  EXPECT_THAT(verify.err, HasSubstr("checksum mismatch"));
}

INSTANTIATE_TEST_SUITE_P(Stores, CheckpointInStore, ::testing::Values("s3", "gs"),
                         [](const auto& param_info) { return param_info.param; });

}  // namespace
}  // namespace reshard
