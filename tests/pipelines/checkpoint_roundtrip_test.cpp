// Checkpoints saved on one layout restore onto others, byte for byte; the
// writing is shared, the commit atomic, and an asynchronous save stages in
// waves under its budget.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <mutex>

#include "execute/support/rank_threads.h"
#include "pipelines/checkpoint/save_plan.h"
#include "pipelines/support/checkpoint_arrays.h"
#include "reshard/formats/checkpoint_reader.h"
#include "reshard/formats/safetensors_reader.h"
#include "reshard/layout/error.h"
#include "reshard/pipelines/checkpoint_restore.h"
#include "reshard/pipelines/checkpoint_save.h"
#include "support/seed.h"

namespace reshard {

using pipelines_detail::PlannedChunk;
using pipelines_detail::SavePlan;

namespace {

namespace fs = std::filesystem;
using testing::LayoutDef;
using testing::TempDir;

Mesh mesh_of(std::vector<MeshAxis> axes, std::vector<DeviceId> devices) { return Mesh(std::move(axes), std::move(devices)); }

PartitionSpec spec(std::string_view text) { return PartitionSpec::parse(text); }

// The layouts saved from and restored onto: mesh shapes, device orders and
// process counts differ.
std::vector<LayoutDef> layouts() {
  return {
      {mesh_of({{"x", 2}, {"y", 2}}, {0, 1, 2, 3}), {spec("x,y"), spec("y"), spec("x"), spec(""), spec("(x,y)")}, 2},
      {mesh_of({{"x", 4}}, {3, 1, 2, 0}), {spec("x"), spec("x"), spec("None"), spec(""), spec("None,None")}, 1},
      {mesh_of({{"d", 2}, {"m", 2}}, {2, 0, 3, 1}), {spec("m,d"), spec("d,m"), spec("(m,d)"), spec(""), spec("d")}, 4},
      {mesh_of({{"r", 2}, {"x", 2}}, {0, 1, 2, 3}), {spec("x"), spec(""), spec("x"), spec(""), spec("None,x")}, 2},
      {mesh_of({{"x", 8}}, {0, 1, 2, 3, 4, 5, 6, 7}), {spec("x"), spec("x"), spec("None"), spec(""), spec("x")}, 4},
  };
}

void save_on(const fs::path& path, const LayoutDef& layout, uint64_t version, const SaveOptions& options = {}) {
  testing::run_ranks(layout.processes, [&](Transport& transport) {
    const auto arrays = testing::make_arrays(testing::small_model(), layout, transport.rank(), version);
    save_checkpoint(arrays, path, transport, options);
  });
}

void expect_restores(const fs::path& path, const LayoutDef& layout, uint64_t version) {
  std::mutex mutex;
  std::vector<std::string> problems;
  testing::run_ranks(layout.processes, [&](Transport& transport) {
    const auto arrays = restore_checkpoint(path, testing::targets_for(testing::small_model(), layout), transport).arrays;
    for (const NamedArray& array : arrays) {
      const std::string problem = testing::mismatch(array, version);
      std::lock_guard lock(mutex);
      if (!problem.empty()) problems.push_back(problem);
    }
  });
  EXPECT_TRUE(problems.empty()) << fmt::format("{}", fmt::join(problems, "\n"));
}

TEST(Checkpoint, SavedOnOneLayoutRestoresOntoEveryOther) {
  TempDir dir;
  const auto all = layouts();
  for (size_t from = 0; from < all.size(); ++from) {
    const fs::path path = dir / fmt::format("ckpt{}", from);
    save_on(path, all[from], from + 1);
    for (size_t to = 0; to < all.size(); ++to) {
      SCOPED_TRACE(fmt::format("saved on layout {}, restored on layout {}", from, to));
      expect_restores(path, all[to], from + 1);
    }
  }
}

TEST(Checkpoint, DataFilesAreSafetensorsOnePerWritingProcess) {
  TempDir dir;
  save_on(dir / "c", layouts()[2], 7);
  const checkpoint::Reader reader = checkpoint::Reader::open(dir / "c");
  EXPECT_LE(reader.manifest().files.size(), 4u);
  size_t entries = 0;
  for (const auto& entry : fs::directory_iterator(dir / "c")) {
    ++entries;
    if (entry.path().filename() == "manifest.json") continue;
    const safetensors::File file = safetensors::File::open(entry.path());
    EXPECT_FALSE(file.tensors().empty()) << entry.path();
  }
  EXPECT_EQ(entries, reader.manifest().files.size() + 1);
  // Nothing is left beside it.
  for (const auto& entry : fs::directory_iterator(dir.path())) EXPECT_EQ(entry.path().filename(), "c");
  const checkpoint::TensorEntry& embed = reader.tensor("embed");
  EXPECT_EQ(embed.shape, (Shape{8, 6}));
  EXPECT_NE(embed.layout.find("PartitionSpec('m', 'd')"), std::string::npos) << embed.layout;
}

// A chunk on several devices or processes is written once; the replicas'
// writing is spread over their holders, not left to process 0.
TEST(Checkpoint, ReplicasAreWrittenOnceAndSpreadOverTheirHolders) {
  const LayoutDef replicated{mesh_of({{"r", 4}}, {0, 1, 2, 3}), {}, 4};
  const auto arrays = testing::make_arrays(testing::small_model(), replicated, 0, 1);
  const SavePlan plan = SavePlan::make(arrays, 4);
  EXPECT_EQ(plan.chunks().size(), arrays.size());
  std::vector<int> writers;
  for (const PlannedChunk& chunk : plan.chunks()) writers.push_back(chunk.writer);
  std::sort(writers.begin(), writers.end());
  EXPECT_EQ(std::unique(writers.begin(), writers.end()) - writers.begin(), 4) << "every holder writes";
  // Sharded over x, replicated over r: each slice once, by one of its two holders.
  const LayoutDef half{mesh_of({{"r", 2}, {"x", 2}}, {0, 1, 2, 3}), {spec("x"), spec("x"), spec("x"), spec(""), spec("x")}, 2};
  const auto more = testing::make_arrays(testing::small_model(), half, 0, 1);
  const SavePlan split = SavePlan::make(more, 2);
  EXPECT_EQ(split.chunks().size(), 9u);
  const uint64_t a = split.bytes_per_process()[0], b = split.bytes_per_process()[1];
  EXPECT_GT(a, 0u);
  EXPECT_GT(b, 0u);
  EXPECT_LE(std::max(a, b) - std::min(a, b), 8u * 6u * 4u) << a << " vs " << b;
}

TEST(Checkpoint, SavingAgainReplacesTheCheckpointWhole) {
  TempDir dir;
  save_on(dir / "c", layouts()[0], 1);
  SaveOptions replacing;
  replacing.replace = true;
  save_on(dir / "c", layouts()[4], 2, replacing);  // another process count: other data files
  expect_restores(dir / "c", layouts()[1], 2);
  const checkpoint::Reader reader = checkpoint::Reader::open(dir / "c");
  size_t entries = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir / "c")) ++entries;
  EXPECT_EQ(entries, reader.manifest().files.size() + 1) << "no stale data files";
  EXPECT_THROW(save_on(dir / "c", layouts()[0], 3), Error);  // replacing is never the default
  expect_restores(dir / "c", layouts()[1], 2);
  // Never over something that is not a checkpoint, even when replacing.
  fs::create_directories(dir / "mine");
  { std::ofstream(dir / "mine" / "notes.txt") << "keep me"; }
  EXPECT_THROW(save_on(dir / "mine", layouts()[0], 1, replacing), Error);
  EXPECT_TRUE(fs::exists(dir / "mine" / "notes.txt"));
}

TEST(Checkpoint, AsyncSaveStagesInWavesAndReturnsBeforeWriting) {
  TempDir dir;
  const LayoutDef layout = layouts()[0];
  SaveOptions options;
  options.staging_bytes = 64;  // far below the model: several waves
  options.metadata = safetensors::Metadata{{"step", "12"}};
  std::mutex mutex;
  std::vector<SaveResult> stats;
  testing::run_ranks(layout.processes, [&](Transport& transport) {
    auto arrays = testing::make_arrays(testing::small_model(), layout, transport.rank(), 5);
    SaveHandle handle = save_checkpoint_async(arrays, dir / "c", transport, options);
    // The arrays may change at once: the save has its own copies.
    for (NamedArray& array : arrays) {
      for (size_t i = 0; i < array.array.shards().size(); ++i) std::ranges::fill(array.array.writable_bytes(i), std::byte{0});
    }
    const SaveResult mine = handle.wait();
    std::lock_guard lock(mutex);
    stats.push_back(mine);
  });
  for (const SaveResult& s : stats) {
    EXPECT_GE(s.waves, 1u);
    EXPECT_GT(s.peak_staged_bytes, 0u);
    EXPECT_LE(s.peak_staged_bytes, options.staging_bytes) << "staged within the budget";
    EXPECT_GT(s.bytes_written, 2 * options.staging_bytes) << "a save several times the budget";
  }
  expect_restores(dir / "c", layouts()[2], 5);
  EXPECT_EQ(checkpoint::Reader::open(dir / "c").manifest().metadata, options.metadata);
}

TEST(Checkpoint, RestoresASubsetIntoPreallocatedArrays) {
  TempDir dir;
  save_on(dir / "c", layouts()[0], 9);
  const LayoutDef target = layouts()[1];
  testing::run_ranks(1, [&](Transport& transport) {
    auto all = testing::make_arrays(testing::small_model(), target, 0, 0);
    std::vector<NamedArray> some{all[0], all[2]};
    restore_checkpoint_into(dir / "c", some, transport);
    EXPECT_EQ(testing::mismatch(some[0], 9), "");
    EXPECT_EQ(testing::mismatch(some[1], 9), "");
    // Another dtype or shape is refused by name.
    std::vector<NamedArray> wrong{{"bias", ShardedArray::allocate({6}, DType::kF32, all[2].array.sharding(),
                                                                  all[2].array.topology(), 0)}};
    try {
      restore_checkpoint_into(dir / "c", wrong, transport);
      ADD_FAILURE() << "a dtype mismatch restored";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("bias"), std::string::npos) << e.what();
    }
  });
}

// Each process reads the bytes its devices need, once however many of its
// devices need them, plus the manifest and headers.
TEST(Checkpoint, EachProcessReadsOnlyWhatItsDevicesNeed) {
  TempDir dir;
  const LayoutDef saved{mesh_of({{"x", 4}}, {0, 1, 2, 3}), {spec("x"), spec("x"), spec("x"), spec(""), spec("x")}, 4};
  save_on(dir / "c", saved, 3);
  const checkpoint::Reader reader = checkpoint::Reader::open(dir / "c");
  const uint64_t headers = reader.counters().header_bytes;
  // Two processes, each with two devices holding the same slice (x splits over processes).
  const LayoutDef target{mesh_of({{"x", 2}, {"r", 2}}, {0, 1, 2, 3}), {spec("x"), spec("x"), spec("x"), spec(""), spec("x")}, 2};
  for (const bool verify : {true, false}) {
    std::mutex mutex;
    std::vector<RestoreResult> stats(2);
    testing::run_ranks(2, [&](Transport& transport) {
      RestoreOptions options;
      options.verify_checksums = verify;
      const RestoreResult mine =
          restore_checkpoint(dir / "c", testing::targets_for(testing::small_model(), target), transport, options);
      for (const NamedArray& array : mine.arrays) EXPECT_EQ(testing::mismatch(array, 3), "");
      std::lock_guard lock(mutex);
      stats[static_cast<size_t>(transport.rank())] = mine;
    });
    // What each process's devices need: half of every split tensor, and the scalar once.
    uint64_t need = 0;
    for (const auto& t : testing::small_model()) {
      const uint64_t bytes = checkpoint::dense_bytes(t.dtype, t.shape);
      need += t.shape.empty() ? bytes : bytes / 2;
    }
    for (int p = 0; p < 2; ++p) {
      SCOPED_TRACE(fmt::format("process {}, verify {}", p, verify));
      EXPECT_EQ(stats[static_cast<size_t>(p)].data_bytes_read, need);
      EXPECT_EQ(stats[static_cast<size_t>(p)].header_bytes_read, headers);
    }
  }
  // A finer target layout needs half of each saved chunk of the split
  // tensors. Unverified, each process reads exactly what it needs. Verified,
  // it reads the checksum blocks that hold those bytes: at least what it
  // needs, at most a partial block more at each end of each chunk part
  // (here one contiguous run per chunk), and less than the whole chunks.
  const LayoutDef finer{mesh_of({{"x", 8}}, {0, 1, 2, 3, 4, 5, 6, 7}), {spec("x"), spec("x"), spec("None"), spec(""), spec("x")}, 8};
  SaveOptions small_blocks;
  small_blocks.checksum_block_bytes = 16;
  save_on(dir / "b", saved, 3, small_blocks);
  const checkpoint::Reader blocked = checkpoint::Reader::open(dir / "b");
  const uint64_t block_headers = blocked.counters().header_bytes;
  for (const bool verify : {false, true}) {
    std::mutex mutex;
    uint64_t total = 0, total_whole_chunks = 0;
    testing::run_ranks(8, [&](Transport& transport) {
      RestoreOptions options;
      options.verify_checksums = verify;
      const RestoreResult mine =
          restore_checkpoint(dir / "b", testing::targets_for(testing::small_model(), finer), transport, options);
      uint64_t need = 0, chunks_met = 0, whole_chunks = 0;
      for (const NamedArray& array : mine.arrays) {
        EXPECT_EQ(testing::mismatch(array, 3), "");
        const checkpoint::TensorEntry& tensor = blocked.tensor(array.name);
        const Box& slice = array.array.shards()[0].box;  // one device per process
        need += checkpoint::dense_bytes(tensor.dtype, slice.shape());
        for (const checkpoint::Chunk& chunk : tensor.chunks) {
          if (chunk.box.intersect(slice).empty()) continue;
          chunks_met += 1;
          whole_chunks += chunk.length;
        }
      }
      std::lock_guard lock(mutex);
      SCOPED_TRACE(fmt::format("process {}, verify {}", transport.rank(), verify));
      EXPECT_EQ(mine.header_bytes_read, block_headers);
      if (verify) {
        EXPECT_GE(mine.data_bytes_read, need);
        EXPECT_LE(mine.data_bytes_read, need + chunks_met * 2 * (16 - 1));
      } else {
        EXPECT_EQ(mine.data_bytes_read, need);
      }
      total += mine.data_bytes_read;
      total_whole_chunks += whole_chunks;
    });
    // Split tensors once in all; the replicated bias and the scalar by every process.
    uint64_t expected = 0;
    for (const auto& t : testing::small_model()) {
      const uint64_t bytes = checkpoint::dense_bytes(t.dtype, t.shape);
      expected += (t.name == "bias" || t.shape.empty()) ? 8 * bytes : bytes;
    }
    if (verify) {
      EXPECT_LT(total, total_whole_chunks) << "verified reads stop at the blocks needed";
    } else {
      EXPECT_EQ(total, expected);
    }
  }
}

// A version 1 checkpoint (one checksum per chunk) still restores, verified
// chunk by chunk.
TEST(Checkpoint, RestoresVersion1Checkpoints) {
  TempDir dir;
  SaveOptions old;
  old.checksum_block_bytes = 0;
  save_on(dir / "c", layouts()[0], 6, old);
  const checkpoint::Reader reader = checkpoint::Reader::open(dir / "c");
  EXPECT_EQ(reader.manifest().version(), 1);
  for (const auto& tensor : reader.manifest().tensors) {
    for (const auto& chunk : tensor.chunks) EXPECT_TRUE(chunk.blocks.empty());
  }
  expect_restores(dir / "c", layouts()[2], 6);
  expect_restores(dir / "c", layouts()[4], 6);
}

}  // namespace
}  // namespace reshard
