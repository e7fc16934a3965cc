// Checkpoints saved into and restored from the object-store test servers
// (S3 and GCS) by real processes under mpirun: each process uploads its own
// data file, process 0 writes the manifest last; the objects equal the files
// of the same save to a local folder; any layout restores from them; a
// replace leaves no stale data file and no upload pending.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <map>
#include <string>

#include "pipelines/checkpoint/save_plan.h"
#include "pipelines/mpi/shared_folder_test.h"
#include "pipelines/support/checkpoint_arrays.h"
#include "reshard/formats/checkpoint_reader.h"
#include "reshard/pipelines/checkpoint_restore.h"
#include "reshard/pipelines/checkpoint_save.h"
#include "reshard/storage/open_store.h"
#include "storage/support/object_listing.h"
#include "storage/support/store_servers.h"

namespace reshard {

using pipelines_detail::data_file_name;

namespace {

using testing::objects_under;
using testing::files_under;

namespace fs = std::filesystem;
using storage::Location;
using testing::LayoutDef;

using CheckpointStoreMpi = testing::SharedFolderMpiTest;

PartitionSpec spec(std::string_view text) { return PartitionSpec::parse(text); }

// Layouts over 4 and 8 devices, split over however many processes run.
std::vector<LayoutDef> layouts(int processes) {
  return {
      {Mesh({{"x", 2}, {"y", 2}}, {0, 1, 2, 3}), {spec("x,y"), spec("y"), spec("x"), spec(""), spec("(x,y)")}, processes},
      {Mesh({{"x", 4}}, {3, 1, 2, 0}), {spec("x"), spec("x"), spec("None"), spec(""), spec("None,None")}, processes},
      {Mesh({{"r", 2}, {"x", 4}}, {0, 4, 1, 5, 2, 6, 3, 7}), {spec("x"), spec(""), spec("x"), spec(""), spec("(r,x)")}, processes},
  };
}

// A prefix no other run uses, the same on every rank (rank 0's).
Location shared_prefix(const std::string& scheme) {
  Transport& world = testing::world_transport();
  std::string mine;
  if (world.rank() == 0) {
    const std::string bucket =
        scheme == "s3" ? testing::s3_server().buckets.at(0) : testing::gcs_server().buckets.at(0);
    mine = fmt::format("{}://{}/{}", scheme, bucket, testing::unique_prefix());
  }
  const auto all = world.all_gather(std::as_bytes(std::span(mine)));
  return Location::parse(std::string(reinterpret_cast<const char*>(all[0].data()), all[0].size()));
}

TEST_F(CheckpointStoreMpi, SavedThroughAStoreRestoresOntoEveryLayout) {
  testing::point_environment_at_servers();
  Transport& world = testing::world_transport();
  const fs::path dir = shared_folder();
  const auto all = layouts(world.size());
  SaveOptions options;
  options.part_bytes = 5 << 20;
  options.replace = true;  // each layout saved over the last one
  for (const std::string scheme : {"s3", "gs"}) {
    SCOPED_TRACE(scheme);
    const Location root = shared_prefix(scheme);
    for (size_t from = 0; from < all.size(); ++from) {
      // Saved over the last one: a replace, at another layout.
      const Location where = root.child("ckpt");
      const auto arrays = testing::make_arrays(testing::small_model(), all[from], world.rank(), from + 1);
      save_checkpoint(arrays, where, world, options);
      const fs::path local = dir / fmt::format("{}-{}", scheme, from);
      save_checkpoint(arrays, local, world, options);
      if (world.rank() == 0) {
        EXPECT_EQ(objects_under(where), files_under(local)) << "saved on layout " << from;
        const auto store = storage::open_store(where);
        for (int p = 0; p < world.size(); ++p) {
          EXPECT_EQ(store->abort_stale_uploads(where.child(data_file_name(p))), 0u) << "an upload was left pending";
        }
      }
      for (size_t to = 0; to < all.size(); ++to) {
        SCOPED_TRACE(fmt::format("saved on layout {}, restored on layout {}, {} processes", from, to, world.size()));
        const auto restored = restore_checkpoint(where, testing::targets_for(testing::small_model(), all[to]), world);
        for (const NamedArray& array : restored.arrays) EXPECT_EQ(testing::mismatch(array, from + 1), "");
      }
    }
  }
}

}  // namespace
}  // namespace reshard
