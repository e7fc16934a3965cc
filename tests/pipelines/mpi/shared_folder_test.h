// A multi-process test fixture with one temporary folder every rank sees:
// rank 0's, handed to the others by name (the ranks share a file system).
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>

#include "mpi_world.h"
#include "support/temp_dir.h"

namespace reshard::testing {

class SharedFolderMpiTest : public MpiTest {
 protected:
  // Collective: rank 0 makes the folder and fills it with `write` (if given)
  // before any rank gets its path, so every rank reads it complete.
  std::filesystem::path shared_folder(const std::function<void(const std::filesystem::path&)>& write = nullptr) {
    std::string mine;
    if (world_transport().rank() == 0) {
      dir_.emplace();
      if (write) write(dir_->path());
      mine = dir_->path().string();
    }
    const auto all = world_transport().all_gather(std::as_bytes(std::span(mine)));
    return std::filesystem::path(std::string(reinterpret_cast<const char*>(all[0].data()), all[0].size()));
  }

  // Every rank is done with the folder before rank 0 removes it.
  void TearDown() override {
    world_transport().barrier();
    dir_.reset();
    MpiTest::TearDown();
  }

 private:
  std::optional<TempDir> dir_;
};

}  // namespace reshard::testing
