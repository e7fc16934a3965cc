// Checkpoints in an object store (the in-memory store, which keeps the object
// stores' rules: no rename, objects appear whole, parts of a minimum size; the
// S3 and GCS drivers pass the same store conformance suite): saved at one
// process count and layout, restored at any other; every object equals the
// file of the same save to a local folder, byte for byte; an existing
// checkpoint is refused or replaced (its stale data files removed); a save
// that fails on any process, or loses one, leaves no manifest and no upload
// pending.
#include <atomic>
#include <map>
#include <mutex>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include "execute/support/forwarding_transport.h"
#include "execute/support/rank_threads.h"
#include "pipelines/checkpoint/checkpoint_stream.h"
#include "pipelines/checkpoint/save_plan.h"
#include "pipelines/support/checkpoint_arrays.h"
#include "pipelines/support/export_files.h"
#include "reshard/formats/checkpoint_reader.h"
#include "reshard/layout/error.h"
#include "reshard/pipelines/checkpoint_restore.h"
#include "reshard/pipelines/checkpoint_save.h"
#include "reshard/storage/open_store.h"
#include "reshard/storage/pending_uploads.h"
#include "storage/support/object_listing.h"
#include "storage/support/store_servers.h"
#include "support/temp_dir.h"

namespace reshard {

using pipelines_detail::data_file_name;
using pipelines_detail::PlannedChunk;
using pipelines_detail::SaveTensor;

namespace {

using testing::objects_under;

namespace fs = std::filesystem;
using storage::Location;
using testing::LayoutDef;

PartitionSpec spec(std::string_view text) { return PartitionSpec::parse(text); }

// Layouts at 1, 2, 3 and 4 processes (the last three split replicas over
// processes), with other device orders.
std::vector<LayoutDef> layouts() {
  return {
      {Mesh({{"x", 4}}, {3, 1, 2, 0}), {spec("x"), spec("x"), spec("None"), spec(""), spec("None,None")}, 1},
      {Mesh({{"x", 2}, {"y", 2}}, {0, 1, 2, 3}), {spec("x,y"), spec("y"), spec("x"), spec(""), spec("(x,y)")}, 2},
      {Mesh({{"a", 3}, {"b", 2}}, {0, 2, 4, 1, 3, 5}), {spec("b,a"), spec("b"), spec(""), spec(""), spec("None,(a,b)")}, 3},
      {Mesh({{"d", 2}, {"m", 2}}, {2, 0, 3, 1}), {spec("m,d"), spec("d,m"), spec("(m,d)"), spec(""), spec("d")}, 4},
  };
}

// The small model and one larger tensor, split so that every process's data
// file is several parts of the memory store's smallest size (1 KiB).
std::vector<testing::TensorDef> larger_model() {
  std::vector<testing::TensorDef> model = testing::small_model();
  model.push_back({"big", {256, 48}, DType::kF32});
  return model;
}
LayoutDef with_big_split(LayoutDef layout, std::string_view big) {
  layout.specs.push_back(spec(big));
  return layout;
}

void save_on(const Location& where, const std::vector<testing::TensorDef>& model, const LayoutDef& layout,
             uint64_t version, const SaveOptions& options = {}) {
  testing::run_ranks(layout.processes, [&](Transport& transport) {
    save_checkpoint(testing::make_arrays(model, layout, transport.rank(), version), where, transport, options);
  });
}
void save_on(const Location& where, const LayoutDef& layout, uint64_t version, const SaveOptions& options = {}) {
  save_on(where, testing::small_model(), layout, version, options);
}

// Restores the small model under `layout`; the problems found, and the chunk bytes each process read.
std::vector<uint64_t> expect_restores(const Location& where, const LayoutDef& layout, uint64_t version) {
  std::mutex mutex;
  std::vector<std::string> problems;
  std::vector<uint64_t> read(static_cast<size_t>(layout.processes));
  testing::run_ranks(layout.processes, [&](Transport& transport) {
    const RestoreResult result = restore_checkpoint(where, testing::targets_for(testing::small_model(), layout), transport);
    read[static_cast<size_t>(transport.rank())] = result.data_bytes_read;
    for (const NamedArray& array : result.arrays) {
      const std::string problem = testing::mismatch(array, version);
      std::lock_guard lock(mutex);
      if (!problem.empty()) problems.push_back(problem);
    }
  });
  EXPECT_TRUE(problems.empty()) << fmt::format("{}", fmt::join(problems, "\n"));
  return read;
}

// Whether any upload of a data file of up to `processes` writers is still in progress.
size_t pending_data_uploads(const Location& where, int processes) {
  const auto store = storage::open_store(where);
  size_t pending = 0;
  for (int p = 0; p < processes; ++p) pending += store->abort_stale_uploads(where.child(data_file_name(p)));
  return pending;
}

class CheckpointStore : public ::testing::Test {
 protected:
  void SetUp() override { root_ = Location::parse("memory://checkpoints/" + testing::unique_prefix()); }

  testing::TempDir dir_;
  Location root_;
};

TEST_F(CheckpointStore, SavedAtOneProcessCountRestoresAtEveryOther) {
  const auto all = layouts();
  for (size_t from = 0; from < 3; ++from) {
    const Location where = root_.child(fmt::format("ckpt{}", from));
    save_on(where, all[from], from + 1);
    EXPECT_TRUE(checkpoint::is_checkpoint(where));
    const fs::path local = dir_ / fmt::format("ckpt{}", from);
    save_on(local, all[from], from + 1);
    for (size_t to = 0; to < all.size(); ++to) {
      SCOPED_TRACE(fmt::format("saved on layout {}, restored on layout {}", from, to));
      const std::vector<uint64_t> from_store = expect_restores(where, all[to], from + 1);
      // Each process asks the store for exactly the ranges it asks a local file for.
      EXPECT_EQ(from_store, expect_restores(local, all[to], from + 1));
    }
  }
  EXPECT_FALSE(checkpoint::is_checkpoint(root_.child("absent")));
}

TEST_F(CheckpointStore, ObjectsEqualTheLocalSavesFilesByteForByte) {
  const auto all = layouts();
  const std::vector<std::string_view> big_specs = {"x", "x,y", "None,(a,b)", "(d,m)"};
  SaveOptions parts;
  parts.part_bytes = 1024;  // several parts a data file
  parts.parts_in_flight = 2;
  parts.metadata = safetensors::Metadata{{"step", "7"}};
  for (size_t l = 0; l < all.size(); ++l) {
    SCOPED_TRACE(fmt::format("layout {}", l));
    const LayoutDef layout = with_big_split(all[l], big_specs[l]);
    const Location where = root_.child(fmt::format("c{}", l));
    const fs::path local = dir_ / fmt::format("c{}", l);
    save_on(where, larger_model(), layout, 3, parts);
    save_on(local, larger_model(), layout, 3, parts);
    const auto files = testing::read_folder_files(local);
    EXPECT_EQ(files.size(), static_cast<size_t>(layout.processes) + 1) << "a data file a process, and the manifest";
    EXPECT_EQ(objects_under(where), files);
    EXPECT_EQ(checkpoint::Reader::open(where).manifest(), checkpoint::Reader::open(local).manifest());
    EXPECT_EQ(pending_data_uploads(where, layout.processes), 0u);
  }
}

TEST_F(CheckpointStore, AsyncSaveAndRestoreIntoPreallocatedArrays) {
  const LayoutDef layout = layouts()[2];
  SaveOptions options;
  options.staging_bytes = 64;  // far below the model: several waves
  const Location where = root_.child("async");
  testing::run_ranks(layout.processes, [&](Transport& transport) {
    auto arrays = testing::make_arrays(testing::small_model(), layout, transport.rank(), 5);
    SaveHandle handle = save_checkpoint_async(arrays, where, transport, options);
    for (NamedArray& array : arrays) {
      for (size_t i = 0; i < array.array.shards().size(); ++i) std::ranges::fill(array.array.writable_bytes(i), std::byte{0});
    }
    EXPECT_GE(handle.wait().waves, 1u);
  });
  const LayoutDef target = layouts()[1];
  testing::run_ranks(target.processes, [&](Transport& transport) {
    auto arrays = testing::make_arrays(testing::small_model(), target, transport.rank(), 0);
    restore_checkpoint_into(where, arrays, transport);
    for (const NamedArray& array : arrays) EXPECT_EQ(testing::mismatch(array, 5), "");
  });
}

TEST_F(CheckpointStore, AnExistingCheckpointIsRefusedUnlessReplacedAndThenLosesItsStaleDataFiles) {
  const Location where = root_.child("c");
  save_on(where, layouts()[2], 1);  // 3 data files
  const auto before = objects_under(where);
  ASSERT_EQ(before.size(), 4u);
  try {
    save_on(where, layouts()[0], 2);  // refused: replacing is asked for, never the default
    FAIL() << "an existing checkpoint was written over";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kAlreadyExists) << e.what();
    EXPECT_NE(std::string(e.what()).find(where.str()), std::string::npos) << e.what();
  }
  EXPECT_EQ(objects_under(where), before);

  SaveOptions replacing;
  replacing.replace = true;
  save_on(where, layouts()[0], 2, replacing);  // one process: data-00001 and data-00002 are stale
  save_on(dir_ / "one", layouts()[0], 2);
  EXPECT_EQ(objects_under(where), testing::read_folder_files(dir_ / "one"));
  expect_restores(where, layouts()[3], 2);
}

TEST_F(CheckpointStore, NeverWritesOverSomethingElse) {
  const auto store = storage::open_store(root_);
  store->write_all(root_.child("mine/notes.txt"), "keep me", storage::IfExists::kFail);
  store->write_all(root_.child("file"), "an object", storage::IfExists::kFail);
  for (const std::string name : {"mine", "file"}) {
    try {
      save_on(root_.child(name), layouts()[1], 1);
      ADD_FAILURE() << name << " was written over";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
      EXPECT_NE(std::string(e.what()).find(root_.child(name).str()), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(objects_under(root_.child("mine")), (std::map<std::string, std::string>{{"notes.txt", "keep me"}}));
  EXPECT_EQ(store->read_all(root_.child("file"), 100), "an object");
  // Data files without a manifest are what a save that failed while
  // completing them leaves: saved over, and the ones not rewritten removed.
  store->write_all(root_.child("left/data-00007.safetensors"), "junk", storage::IfExists::kFail);
  save_on(root_.child("left"), layouts()[1], 4);
  save_on(dir_ / "left", layouts()[1], 4);
  EXPECT_EQ(objects_under(root_.child("left")), testing::read_folder_files(dir_ / "left"));
}

TEST_F(CheckpointStore, UploadsAKilledSaverLeftForTheSameDataFilesAreRemovedFirst) {
  const Location where = root_.child("c");
  const auto store = storage::open_store(where);
  const std::vector<std::byte> part(10, std::byte{1});
  const auto stale = store->start_upload(where.child(data_file_name(1)), storage::PartLayout::single(10),
                                         storage::IfExists::kReplace);
  stale->write_part(0, part);
  save_on(where, layouts()[1], 6);
  EXPECT_THROW(stale->write_part(0, part), Error) << "the stale upload is still there";
  EXPECT_EQ(pending_data_uploads(where, 2), 0u);
  expect_restores(where, layouts()[0], 6);
}

// Bytes of a saved chunk: zeros, except on `failing`, which throws at its
// second piece, once every other process has uploaded everything it has.
pipelines_detail::ChunkFill failing_fill(int rank, int failing) {
  auto pieces = std::make_shared<int>(0);
  return [=](const PlannedChunk&, const Box&, std::span<std::byte> out) {
    if (rank == failing && ++*pieces == 2) throw Error(ErrorCode::kIo, "injected failure while staging");
    std::ranges::fill(out, std::byte{0});
  };
}

TEST_F(CheckpointStore, AFailureOnOneProcessLeavesNoManifestAndNoPendingUpload) {
  const LayoutDef layout = layouts()[2];
  const Location fresh = root_.child("fresh");
  const Location replaced = root_.child("replaced");
  save_on(replaced, layout, 1);
  const auto before = objects_under(replaced);
  for (const Location& where : {fresh, replaced}) {
    SCOPED_TRACE(where.str());
    std::vector<ErrorCode> codes(3, ErrorCode::kInvalidArgument);
    SaveOptions options;
    options.staging_bytes = 64;  // several pieces a process
    options.replace = true;
    EXPECT_THROW(testing::run_ranks(3,
                                    [&](Transport& transport) {
                                      std::vector<SaveTensor> tensors;
                                      for (const NamedArray& named : testing::make_arrays(testing::small_model(), layout,
                                                                                          transport.rank(), 2)) {
                                        tensors.push_back(SaveTensor::of(named));
                                      }
                                      try {
                                        pipelines_detail::save_checkpoint_streamed(
                                            where, tensors, transport, options, failing_fill(transport.rank(), 1));
                                      } catch (const Error& e) {
                                        codes[static_cast<size_t>(transport.rank())] = e.code();
                                        throw;
                                      }
                                    }),
                 Error);
    EXPECT_EQ(codes, (std::vector<ErrorCode>{ErrorCode::kPeerFailed, ErrorCode::kIo, ErrorCode::kPeerFailed}));
    // Every upload aborted before any completed: what was there is there.
    const std::map<std::string, std::string> expected = where == fresh ? std::map<std::string, std::string>() : before;
    EXPECT_EQ(objects_under(where), expected);
    EXPECT_EQ(pending_data_uploads(where, 3), 0u);
    EXPECT_EQ(storage::abort_pending_uploads(), 0u) << "an upload is still remembered as pending";
  }
  expect_restores(replaced, layouts()[1], 1);
}

// Another transport whose rank `dying` fails at its `call`-th all_gather, as
// a process that dies there would look to its peers.
class DyingTransport final : public testing::ForwardingTransport {
 public:
  DyingTransport(Transport& inner, int dying, int call) : ForwardingTransport(inner), dies_(inner.rank() == dying), call_(call) {}
  std::vector<std::vector<std::byte>> all_gather(std::span<const std::byte> local) override {
    if (dies_ && ++calls_ == call_) throw Error(ErrorCode::kTransport, "injected: this process died");
    return ForwardingTransport::all_gather(local);
  }

 private:
  bool dies_;
  int call_;
  int calls_ = 0;
};

TEST_F(CheckpointStore, AProcessLostAtAnyStepBeforeTheManifestLeavesNoManifestAndNoPendingUpload) {
  const LayoutDef layout = layouts()[2];
  // The exchanges of a save: prepared, every part uploaded, old manifest
  // removed (replacing), data files completed. Before the fourth every
  // process completed its data file: the survivors remove theirs; a killed
  // process's would stay, without a manifest, for the next save to remove.
  for (int call = 1; call <= 4; ++call) {
    for (const bool replace : {false, true}) {
      SCOPED_TRACE(fmt::format("process 2 lost at exchange {}, {}", call, replace ? "replacing" : "fresh"));
      const Location where = root_.child(fmt::format("lost{}-{}", call, replace));
      if (replace) save_on(where, layout, 1);
      const auto before = objects_under(where);
      EXPECT_THROW(testing::run_ranks(layout.processes,
                                      [&](Transport& transport) {
                                        DyingTransport dying(transport, 2, call);
                                        const auto arrays = testing::make_arrays(testing::small_model(), layout,
                                                                                 transport.rank(), 2);
                                        SaveOptions options;
                                        options.replace = replace;
                                        save_checkpoint(arrays, where, dying, options);
                                      }),
                   Error);
      const auto after = objects_under(where);
      EXPECT_FALSE(after.contains(std::string(checkpoint::kManifestFileName)) && after != before)
          << "a new manifest appeared";
      if (call <= 2) {
        EXPECT_EQ(after, before) << "the destination changed before any data file completed";
      }
      if (call == 3 && !replace) {
        EXPECT_TRUE(after.empty());
      }
      if (call == 4) {
        EXPECT_FALSE(after.contains(std::string(checkpoint::kManifestFileName)));
        for (const auto& [name, bytes] : after) EXPECT_EQ(name, data_file_name(2)) << "a survivor kept its data file";
      }
      EXPECT_EQ(pending_data_uploads(where, layout.processes), 0u);
      EXPECT_EQ(storage::abort_pending_uploads(), 0u);
    }
  }
}

}  // namespace
}  // namespace reshard
