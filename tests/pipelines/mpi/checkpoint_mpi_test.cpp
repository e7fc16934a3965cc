// Checkpoints saved and restored by real processes: every layout onto every
// other, bytes identical, whatever the number of ranks.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "pipelines/mpi/shared_folder_test.h"
#include "pipelines/support/checkpoint_arrays.h"
#include "reshard/layout/error.h"
#include "reshard/pipelines/checkpoint_restore.h"
#include "reshard/pipelines/checkpoint_save.h"

namespace reshard {
namespace {

namespace fs = std::filesystem;
using testing::LayoutDef;

using CheckpointMpi = testing::SharedFolderMpiTest;

PartitionSpec spec(std::string_view text) { return PartitionSpec::parse(text); }

// Layouts over 4 and 8 devices, split over however many processes run.
std::vector<LayoutDef> layouts(int processes) {
  return {
      {Mesh({{"x", 2}, {"y", 2}}, {0, 1, 2, 3}), {spec("x,y"), spec("y"), spec("x"), spec(""), spec("(x,y)")}, processes},
      {Mesh({{"x", 4}}, {3, 1, 2, 0}), {spec("x"), spec("x"), spec("None"), spec(""), spec("None,None")}, processes},
      {Mesh({{"r", 2}, {"x", 4}}, {0, 4, 1, 5, 2, 6, 3, 7}), {spec("x"), spec(""), spec("x"), spec(""), spec("(r,x)")}, processes},
      {Mesh({{"x", 8}}, {7, 6, 5, 4, 3, 2, 1, 0}), {spec("x"), spec("x"), spec("None"), spec(""), spec("x")}, processes},
  };
}

TEST_F(CheckpointMpi, SavedOnOneLayoutRestoresOntoEveryOther) {
  Transport& world = testing::world_transport();
  const fs::path dir = shared_folder();
  const auto all = layouts(world.size());
  for (size_t from = 0; from < all.size(); ++from) {
    const fs::path path = dir / fmt::format("ckpt{}", from);
    save_checkpoint(testing::make_arrays(testing::small_model(), all[from], world.rank(), from + 1), path, world);
    for (size_t to = 0; to < all.size(); ++to) {
      SCOPED_TRACE(fmt::format("saved on layout {}, restored on layout {}, {} processes", from, to, world.size()));
      const auto arrays = restore_checkpoint(path, testing::targets_for(testing::small_model(), all[to]), world).arrays;
      for (const NamedArray& array : arrays) EXPECT_EQ(testing::mismatch(array, from + 1), "");
    }
  }
}

TEST_F(CheckpointMpi, AsyncSaveWaitsForEveryProcess) {
  Transport& world = testing::world_transport();
  const fs::path dir = shared_folder();
  const LayoutDef layout = layouts(world.size())[2];
  SaveOptions options;
  options.staging_bytes = 100;
  auto arrays = testing::make_arrays(testing::small_model(), layout, world.rank(), 4);
  SaveHandle handle = save_checkpoint_async(arrays, dir / "c", world, options);
  const SaveResult stats = handle.wait();
  EXPECT_GE(stats.waves, 1u);
  const auto restored = restore_checkpoint(dir / "c", testing::targets_for(testing::small_model(), layouts(world.size())[3]), world).arrays;
  for (const NamedArray& array : restored) EXPECT_EQ(testing::mismatch(array, 4), "");
}

TEST_F(CheckpointMpi, AFailureOnOneProcessFailsEveryProcess) {
  Transport& world = testing::world_transport();
  const fs::path dir = shared_folder();
  const LayoutDef layout = layouts(world.size())[0];
  save_checkpoint(testing::make_arrays(testing::small_model(), layout, world.rank(), 1), dir / "c", world);
  // The last rank asks for a tensor the checkpoint does not have.
  auto targets = testing::targets_for(testing::small_model(), layout);
  if (world.rank() == world.size() - 1) targets[0].name = "missing";
  try {
    restore_checkpoint(dir / "c", targets, world);
    ADD_FAILURE() << "the restore succeeded on rank " << world.rank();
  } catch (const Error& e) {
    const bool failing_rank = world.rank() == world.size() - 1;
    EXPECT_EQ(e.code(), failing_rank ? ErrorCode::kMissingTensor : ErrorCode::kPeerFailed) << e.what();
    EXPECT_NE(std::string(e.what()).find("missing"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace reshard
