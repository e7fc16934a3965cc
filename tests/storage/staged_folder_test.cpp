// The commit protocol of local output folders: a new folder appears in one
// rename; replacing a folder with files is one swap of a full copy (the old
// folder untouched until then, its kept files hard-linked, not copied); a
// failure before the swap leaves the old folder whole and no staging behind;
// dead writers' staging folders are removed by the next writer.
#include "storage/local/staged_folder.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "reshard/layout/error.h"
#include "storage/local/staging_name.h"
#include "storage/support/object_listing.h"
#include "support/error_of.h"
#include "support/temp_dir.h"

namespace reshard::storage_detail {
namespace {

using testing::error_of;
using testing::files_under;

namespace fs = std::filesystem;
using testing::TempDir;

void write_text(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

ino_t inode_of(const fs::path& path) {
  struct stat info {};
  EXPECT_EQ(::lstat(path.c_str(), &info), 0) << path;
  return info.st_ino;
}

size_t entries_in(const fs::path& folder) {
  return static_cast<size_t>(std::distance(fs::directory_iterator(folder), fs::directory_iterator()));
}

// An old model folder: a weight file a new save replaces, configs it keeps, a subfolder.
std::map<std::string, std::string> make_old_folder(const fs::path& out) {
  write_text(out / "model.safetensors", "old weights");
  write_text(out / "config.json", "old config");
  write_text(out / "tokenizer.json", "tokenizer");
  write_text(out / "original" / "params.json", "params");
  return files_under(out);
}

TEST(StagedFolder, AppearsOnlyOnCommit) {
  TempDir dir;
  const fs::path out = dir / "nested" / "out";
  {
    StagedFolder staged(out, false);
    write_text(staged.staging_path() / "a.txt", "a");
    EXPECT_FALSE(fs::exists(out));
    const std::vector<std::string> order = {"a.txt"};
    staged.commit({}, order);
  }
  EXPECT_EQ(read_text(out / "a.txt"), "a");
  EXPECT_EQ(entries_in(dir / "nested"), 1u);
}

TEST(StagedFolder, AnEmptyFolderIsReplacedAndAFileRefused) {
  TempDir dir;
  fs::create_directory(dir / "empty");
  {
    StagedFolder staged(dir / "empty/", false);
    write_text(staged.staging_path() / "a.txt", "a");
    staged.commit({}, std::vector<std::string>{"a.txt"});
  }
  EXPECT_TRUE(fs::exists(dir / "empty" / "a.txt"));
  write_text(dir / "file", "x");
  const auto error = error_of([&] { StagedFolder(dir / "file", true); });
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(error->what(), ::testing::HasSubstr("not a folder"));
}

TEST(StagedFolder, AFolderWithFilesIsRefusedUnlessReplacing) {
  TempDir dir;
  const auto before = make_old_folder(dir / "out");
  const auto error = error_of([&] { StagedFolder(dir / "out", false); });
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->code(), ErrorCode::kAlreadyExists);
  EXPECT_EQ(files_under(dir / "out"), before);
  EXPECT_EQ(entries_in(dir.path()), 1u);  // no staging folder was made
}

TEST(StagedFolder, ReplacingAFolderIsOneSwapOfAFullCopy) {
  TempDir dir;
  const fs::path out = dir / "out";
  const auto before = make_old_folder(out);
  const ino_t kept_file = inode_of(out / "tokenizer.json");
  StagedFolder staged(out, true);
  EXPECT_TRUE(staged.replaces_files());
  write_text(staged.staging_path() / "model-00001-of-00002.safetensors", "new 1");
  write_text(staged.staging_path() / "model-00002-of-00002.safetensors", "new 2");
  write_text(staged.staging_path() / "config.json", "new config");
  write_text(staged.staging_path() / "model.safetensors.index.json", "index");
  // Everything written so far went to the staging folder: the old one is as it was.
  EXPECT_EQ(files_under(out), before);
  const ino_t staging = inode_of(staged.staging_path());
  const std::vector<std::string> stale = {"model.safetensors"};
  const std::vector<std::string> order = {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                                          "config.json", "model.safetensors.index.json"};
  staged.commit(stale, order);

  EXPECT_EQ(files_under(out), (std::map<std::string, std::string>{{"config.json", "new config"},
                                                               {"model-00001-of-00002.safetensors", "new 1"},
                                                               {"model-00002-of-00002.safetensors", "new 2"},
                                                               {"model.safetensors.index.json", "index"},
                                                               {"original/params.json", "params"},
                                                               {"tokenizer.json", "tokenizer"}}));
  // The staging folder itself took the old one's place (a swap, not file by
  // file), and the kept files are the old ones, linked rather than copied.
  EXPECT_EQ(inode_of(out), staging);
  EXPECT_EQ(inode_of(out / "tokenizer.json"), kept_file);
  EXPECT_EQ(entries_in(dir.path()), 1u);  // the old folder is gone
}

TEST(StagedFolder, AFailureBeforeTheSwapLeavesTheOldFolderWholeAndNoStaging) {
  TempDir dir;
  const fs::path out = dir / "out";
  auto before = make_old_folder(out);
  {
    // Abandoned after writing: the writer failed.
    StagedFolder staged(out, true);
    write_text(staged.staging_path() / "model.safetensors", "new weights");
  }
  EXPECT_EQ(files_under(out), before);
  EXPECT_EQ(entries_in(dir.path()), 1u);

  // A commit that fails while making the full copy (an entry it cannot carry).
  ASSERT_EQ(::mkfifo((out / "a-pipe").c_str(), 0600), 0);
  {
    StagedFolder staged(out, true);
    write_text(staged.staging_path() / "model.safetensors", "new weights");
    const auto error = error_of([&] { staged.commit(std::vector<std::string>{"model.safetensors"},
                                                    std::vector<std::string>{"model.safetensors"}); });
    ASSERT_TRUE(error.has_value());
    EXPECT_EQ(error->code(), ErrorCode::kIo);
    EXPECT_THAT(error->what(), ::testing::HasSubstr("a-pipe"));
  }
  EXPECT_EQ(files_under(out), before);
  EXPECT_TRUE(fs::is_fifo(out / "a-pipe"));
  EXPECT_EQ(entries_in(dir.path()), 1u);
}

TEST(StagedFolder, ANewWriterRemovesWhatDeadWritersLeft) {
  TempDir dir;
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  ::waitpid(child, nullptr, 0);  // now a process id of no process
  const fs::path dead = dir / fmt::format(".out.tmp-reshard-{}-{}-0000abcd", this_host(), child);
  const fs::path live = dir / fmt::format(".out.tmp-reshard-{}-{}-0000abcd", this_host(), ::getpid());
  const fs::path other_host = dir / fmt::format(".out.tmp-reshard-elsewhere-{}-0000abcd", child);
  for (const fs::path& staging : {dead, live, other_host}) write_text(staging / "model.safetensors", "x");
  {
    StagedFolder staged(dir / "out", false);
    staged.commit({}, {});
  }
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_TRUE(fs::exists(live));        // this process is alive
  EXPECT_TRUE(fs::exists(other_host));  // another host's writer cannot be known dead
  EXPECT_TRUE(fs::is_directory(dir / "out"));
}

TEST(StagedFolder, AWriterWhoseProcessIdWasReusedIsTakenForDead) {
  TempDir dir;
  const auto start = process_start(::getpid());
  ASSERT_TRUE(start.has_value());
  // This process's id, but started at another time: a dead writer whose id this process now has.
  const fs::path reused = dir / fmt::format(".out.tmp-reshard-{}-{}.{}-0000abcd", this_host(), ::getpid(), *start + 1);
  const fs::path live = dir / fmt::format(".out.tmp-reshard-{}-{}.{}-0000abcd", this_host(), ::getpid(), *start);
  for (const fs::path& staging : {reused, live}) write_text(staging / "model.safetensors", "x");
  {
    StagedFolder staged(dir / "out", false);
    // Its own staging names carry its start time, so a later writer would keep it while it runs.
    const auto owner = staging_owner(staged.staging_path().filename().string(), "out");
    ASSERT_TRUE(owner.has_value());
    EXPECT_EQ(owner->start, start);
    EXPECT_FALSE(owner_is_dead(*owner));
    staged.commit({}, {});
  }
  EXPECT_FALSE(fs::exists(reused));
  EXPECT_TRUE(fs::exists(live));
}

}  // namespace
}  // namespace reshard::storage_detail
