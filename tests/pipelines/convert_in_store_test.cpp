// `convert` from and to an object store (the in-memory store, which keeps the
// object stores' rules: no rename, whole objects, parts of a minimum size):
// every object equals the file of the same conversion between local folders,
// byte for byte, from a local or an object source, at any process count; an
// existing destination is refused, replaced only when asked (its stale weight
// files removed, its other files kept); a failure on any process, while the
// parts are written or while process 0 completes the folder, leaves nothing
// at the destination and no upload pending. A checkpoint made from objects,
// in a store, equals the one made from the local folder, and back.
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "execute/support/rank_threads.h"
#include "pipelines/support/export_files.h"
#include "pipelines/support/hf_llama_folder.h"
#include "pipelines/support/store_folders.h"
#include "reshard/formats/hf_index.h"
#include "reshard/layout/error.h"
#include "reshard/pipelines/convert.h"
#include "reshard/storage/open_store.h"
#include "storage/support/object_listing.h"
#include "support/seed.h"
#include "support/temp_dir.h"

namespace reshard {
namespace {

namespace fs = std::filesystem;
using storage::Location;

std::string read_local(const fs::path& path) {
  std::map<std::string, std::string> files = testing::read_folder_files(path.parent_path());
  return files.at(path.filename().string());
}

class ConvertInStore : public ::testing::Test {
 protected:
  void SetUp() override {
    std::mt19937_64 rng = testing::seeded_rng();
    const testing::LlamaDims dims;
    const std::vector<safetensors::TensorSpec> specs = testing::hf_llama_specs(dims);
    testing::TensorBytes bytes;
    for (const auto& spec : specs) bytes[spec.name] = testing::random_values(spec, rng);
    testing::write_hf_model_folder(dir_ / "hf", specs, bytes, 6000, testing::hf_llama_config_json(dims));
    std::ofstream(dir_ / "hf" / "tokenizer.json") << R"({"version": "1.0"})";
    src_ = testing::fresh_memory_folder("convert-src");
    testing::upload_folder(dir_ / "hf", src_);
    root_ = testing::fresh_memory_folder("convert-out");
  }

  // Converts at `ranks` in-process processes.
  void convert(int ranks, const Location& src, const Location& dst, const ConvertOptions& options) {
    testing::run_ranks(ranks, [&](Transport& transport) { convert_model(src, dst, transport, options); });
  }

  static ConvertOptions options(ConvertOutput output, uint64_t max_shard_size = 5000) {
    ConvertOptions options;
    options.output = output;
    options.dtype = DType::kBF16;          // casts on the way: rows read and cast by range
    options.max_shard_size = max_shard_size;  // several files and an index
    options.upload = {1024, 2};            // many parts a file: every process owns some
    return options;
  }

  testing::TempDir dir_;
  Location src_;
  Location root_;
};

TEST_F(ConvertInStore, ObjectsEqualTheLocalConversionFromEitherSourceAtAnyProcessCount) {
  convert(1, dir_ / "hf", dir_ / "local-folder", options(ConvertOutput::kHfFolder));
  convert(1, dir_ / "hf", dir_ / "local.safetensors", options(ConvertOutput::kSafetensorsFile));
  const auto folder = testing::read_folder_files(dir_ / "local-folder");
  ASSERT_TRUE(folder.contains(std::string(kHfIndexFileName)));
  ASSERT_TRUE(folder.contains("tokenizer.json"));  // carried
  const std::string file = read_local(dir_ / "local.safetensors");
  for (const Location& src : {Location(dir_ / "hf"), src_}) {
    for (const int ranks : {1, 2, 3}) {
      SCOPED_TRACE(fmt::format("from {} at {} ranks", src.str(), ranks));
      const Location out = root_.child(fmt::format("{}-np{}", src.is_local() ? "local" : "objects", ranks));
      convert(ranks, src, out.child("folder"), options(ConvertOutput::kHfFolder));
      EXPECT_EQ(testing::objects_under(out.child("folder")), folder);
      convert(ranks, src, out.child("model.safetensors"), options(ConvertOutput::kSafetensorsFile));
      EXPECT_EQ(storage::open_store(out)->read_all(out.child("model.safetensors"), file.size() + 1), file);
    }
  }
  // From objects to a local folder.
  convert(2, src_, dir_ / "from-objects", options(ConvertOutput::kHfFolder));
  EXPECT_EQ(testing::read_folder_files(dir_ / "from-objects"), folder);
  EXPECT_EQ(convert_output_for(root_.child("objects-np1/model.safetensors"), false), ConvertOutput::kSafetensorsFile);
  // A prefix named *.safetensors with objects under it is a folder.
  convert(1, src_, root_.child("named.safetensors"), options(ConvertOutput::kHfFolder));
  EXPECT_EQ(convert_output_for(root_.child("named.safetensors"), false), ConvertOutput::kHfFolder);
}

TEST_F(ConvertInStore, ACheckpointFromObjectsEqualsTheOneFromTheLocalFolder) {
  ConvertOptions options;
  options.output = ConvertOutput::kCheckpoint;
  options.layout = CheckpointLayout{Mesh({{"x", 4}}, {0, 1, 2, 3}), Topology::uniform(4, 2), {}, std::string("x")};
  options.upload = {1024, 2};
  convert(2, dir_ / "hf", dir_ / "ckpt", options);
  const auto expected = testing::read_folder_files(dir_ / "ckpt");
  convert(2, src_, root_.child("ckpt"), options);
  EXPECT_EQ(testing::objects_under(root_.child("ckpt")), expected);
  convert(2, root_.child("ckpt"), root_.child("from-ckpt"), ConvertInStore::options(ConvertOutput::kHfFolder));
  convert(1, dir_ / "ckpt", dir_ / "from-ckpt", ConvertInStore::options(ConvertOutput::kHfFolder));
  EXPECT_EQ(testing::objects_under(root_.child("from-ckpt")), testing::read_folder_files(dir_ / "from-ckpt"));
}

TEST_F(ConvertInStore, AnExistingDestinationIsRefusedUnlessReplacedAndThenLosesItsOldWeightFiles) {
  const Location out = root_.child("hf");
  convert(2, src_, out, options(ConvertOutput::kHfFolder));
  storage::open_store(out)->write_all(out.child("notes.txt"), "mine", storage::IfExists::kFail);
  const auto before = testing::objects_under(out);
  ConvertOptions one_file = options(ConvertOutput::kHfFolder, kDefaultMaxShardSize);
  try {
    convert(2, src_, out, one_file);
    FAIL() << "an existing folder was written over";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kAlreadyExists) << e.what();
  }
  EXPECT_EQ(testing::objects_under(out), before);

  one_file.replace = true;
  convert(2, src_, out, one_file);
  one_file.replace = false;
  convert(1, dir_ / "hf", dir_ / "one-file", one_file);
  auto expected = testing::read_folder_files(dir_ / "one-file");
  expected["notes.txt"] = "mine";  // not a weight file: it stays
  EXPECT_EQ(testing::objects_under(out), expected);

  // A lone file: only that object is refused, the folder around it may hold others.
  const Location file = root_.child("files/model.safetensors");
  convert(1, src_, file, options(ConvertOutput::kSafetensorsFile));
  EXPECT_THROW(convert(2, src_, file, options(ConvertOutput::kSafetensorsFile)), Error);
  ConvertOptions replace = options(ConvertOutput::kSafetensorsFile);
  replace.replace = true;
  convert(2, src_, file, replace);
  convert(1, src_, root_.child("files/other.safetensors"), options(ConvertOutput::kSafetensorsFile));
}

TEST_F(ConvertInStore, AFailureWhileWritingLeavesNothingAndNoUpload) {
  const Location out = root_.child("failed");
  convert(1, dir_ / "hf", dir_ / "names", options(ConvertOutput::kHfFolder));
  std::vector<std::string> names;
  for (const auto& [name, bytes] : testing::read_folder_files(dir_ / "names")) names.push_back(name);
  ConvertOptions failing = options(ConvertOutput::kHfFolder);
  testing::run_ranks(3, [&](Transport& transport) {
    ConvertOptions mine = failing;
    int calls = 0;
    if (transport.rank() == 1) {
      mine.progress = [&calls](uint64_t) {
        if (++calls == 3) throw Error(ErrorCode::kIo, "injected: the network went away");
      };
    }
    try {
      convert_model(src_, out, transport, mine);
      ADD_FAILURE() << "rank " << transport.rank() << " did not fail";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("injected"), std::string::npos) << e.what();
    }
  });
  EXPECT_TRUE(testing::objects_under(out).empty());
  EXPECT_EQ(testing::pending_uploads(out, names), 0u);
}

TEST_F(ConvertInStore, AFailureWhileCompletingTheFolderTakesBackWhatAppeared) {
  // config.json is read, and its dtype rewritten, once the weight files are complete.
  const Location src = testing::fresh_memory_folder("convert-src");
  testing::upload_folder(dir_ / "hf", src);
  storage::open_store(src)->write_all(src.child("config.json"), "not json", storage::IfExists::kReplace);
  const Location out = root_.child("incomplete");
  try {
    convert(2, src, out, options(ConvertOutput::kHfFolder));
    FAIL() << "a config.json that is not JSON was rewritten";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidConfig) << e.what();
    EXPECT_NE(std::string(e.what()).find("config.json"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(testing::objects_under(out).empty());
}

}  // namespace
}  // namespace reshard
