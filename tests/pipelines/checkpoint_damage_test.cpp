// Damaged checkpoints (a flipped bit, a truncated or deleted data file, an
// edited manifest) are reported naming what is lost, and never restore
// wrong bytes; a full disk fails the save and leaves the old checkpoint.
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <fstream>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "execute/support/rank_threads.h"
#include "pipelines/support/checkpoint_arrays.h"
#include "reshard/formats/checkpoint_reader.h"
#include "reshard/formats/file_rules.h"
#include "reshard/layout/error.h"
#include "reshard/pipelines/checkpoint_restore.h"
#include "reshard/pipelines/checkpoint_save.h"
#include "support/seed.h"

namespace reshard {
namespace {

namespace fs = std::filesystem;
using testing::LayoutDef;
using testing::TempDir;

LayoutDef two_processes() {
  return {Mesh({{"x", 2}, {"y", 2}}, {0, 1, 2, 3}),
          {PartitionSpec::parse("x,y"), PartitionSpec::parse("y"), PartitionSpec::parse("x"), PartitionSpec(),
           PartitionSpec::parse("x")},
          2};
}

// Blocks of 16 bytes: most chunks of the small model have several.
constexpr uint64_t kBlockBytes = 16;

void save(const fs::path& path, uint64_t version, uint64_t block_bytes = kBlockBytes, bool replace = false) {
  const LayoutDef layout = two_processes();
  SaveOptions options;
  options.checksum_block_bytes = block_bytes;
  options.replace = replace;
  testing::run_ranks(layout.processes, [&](Transport& transport) {
    save_checkpoint(testing::make_arrays(testing::small_model(), layout, transport.rank(), version), path, transport,
                    options);
  });
}

// Restores everything on one process; returns the error, checking that no
// array came back.
std::optional<Error> restore_error(const fs::path& path) {
  const LayoutDef one{Mesh({{"x", 4}}, {0, 1, 2, 3}), {}, 1};
  std::optional<Error> error;
  testing::run_ranks(1, [&](Transport& transport) {
    try {
      restore_checkpoint(path, testing::targets_for(testing::small_model(), one), transport);
    } catch (const Error& e) {
      error = e;
    }
  });
  return error;
}

void expect_error_naming(const std::optional<Error>& error, ErrorKind kind, const std::vector<std::string>& parts) {
  ASSERT_TRUE(error.has_value()) << "restored a damaged checkpoint";
  EXPECT_EQ(error->kind(), kind) << error->what();
  for (const std::string& part : parts) EXPECT_NE(std::string(error->what()).find(part), std::string::npos) << part << ": " << error->what();
}

std::string read_file(const fs::path& path) {
  std::string bytes(static_cast<size_t>(fs::file_size(path)), '\0');
  std::ifstream in(path, std::ios::binary);
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return bytes;
}

void write_file(const fs::path& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

TEST(CheckpointDamage, AFlippedBitInAnyChunkNamesTensorChunkAndFile) {
  auto rng = testing::seeded_rng();
  for (const uint64_t block_bytes : {kBlockBytes, uint64_t{0}}) {  // version 2, and version 1
  SCOPED_TRACE(fmt::format("checksum blocks of {} bytes", block_bytes));
  TempDir dir;
  save(dir / "c", 1, block_bytes);
  const checkpoint::Manifest manifest = checkpoint::Reader::open(dir / "c").manifest();
  for (const checkpoint::TensorEntry& tensor : manifest.tensors) {
    for (size_t c = 0; c < tensor.chunks.size(); ++c) {
      const checkpoint::Chunk& chunk = tensor.chunks[c];
      const fs::path file = dir / "c" / chunk.file;
      const std::string good = read_file(file);
      std::string bad = good;
      const uint64_t at = chunk.offset + rng() % chunk.length;
      bad[at] = static_cast<char>(bad[at] ^ (1 << (rng() % 8)));
      write_file(file, bad);
      SCOPED_TRACE(fmt::format("{} chunk {} byte {}", tensor.name, c, at));
      std::vector<std::string> names{fmt::format("\"{}\"", tensor.name), fmt::format("chunk {}", c), chunk.file};
      if (block_bytes != 0) names.push_back(fmt::format("block {}", (at - chunk.offset) / block_bytes));
      expect_error_naming(restore_error(dir / "c"), ErrorCode::kChecksumMismatch, names);
      write_file(file, good);
    }
  }
  EXPECT_FALSE(restore_error(dir / "c").has_value());
  }
}

// Every chunk read back whole, as `reshard verify` does; the first error.
std::optional<Error> verify_error(const fs::path& path) {
  try {
    const checkpoint::Reader reader = checkpoint::Reader::open(path);
    for (const checkpoint::TensorEntry& tensor : reader.manifest().tensors) {
      for (size_t c = 0; c < tensor.chunks.size(); ++c) {
        std::vector<std::byte> bytes(static_cast<size_t>(tensor.chunks[c].length));
        reader.read_chunk(tensor, c, bytes);
      }
    }
  } catch (const Error& e) {
    return e;
  }
  return std::nullopt;
}

// A read that needs only some blocks of a chunk checks only those: damage in
// another block does not stop it (its bytes are right), and verifying the
// whole checkpoint still finds the damage.
TEST(CheckpointDamage, AFlippedBitInABlockNotReadIsStillCaughtByVerify) {
  TempDir dir;
  save(dir / "c", 4);
  const checkpoint::Reader reader = checkpoint::Reader::open(dir / "c");
  const checkpoint::TensorEntry& tensor = reader.tensor("opt.m");  // F32 [8, 6], rows split over x
  const checkpoint::Chunk& chunk = tensor.chunks[0];
  ASSERT_EQ(chunk.box, Box({0, 0}, {4, 6}));
  ASSERT_EQ(chunk.blocks.size(), 6u);  // 96 bytes
  // Rows 0 and 1 are the chunk's first 48 bytes: blocks 0 to 2.
  const Box rows_box({0, 0}, {2, 6});
  std::vector<std::byte> saved(48), rows(48);
  reader.read_box(tensor, rows_box, saved);
  const fs::path file = dir / "c" / chunk.file;
  const std::string good = read_file(file);
  std::string bad = good;
  bad[chunk.offset + 90] = static_cast<char>(bad[chunk.offset + 90] ^ 0x04);  // in the last block, row 3
  write_file(file, bad);
  const checkpoint::Reader damaged = checkpoint::Reader::open(dir / "c");
  damaged.read_box(damaged.tensor("opt.m"), rows_box, rows);
  EXPECT_EQ(rows, saved);
  EXPECT_EQ(damaged.counters().data_bytes, 48u) << "only the three blocks the rows are in";
  // A restore of the other tensors does not read the damaged chunk at all.
  const LayoutDef one{Mesh({{"x", 1}}, {0}), {}, 1};
  testing::run_ranks(1, [&](Transport& transport) {
    std::vector<RestoreTarget> targets = testing::targets_for(testing::small_model(), one);
    targets.pop_back();  // opt.m
    const auto arrays = restore_checkpoint(dir / "c", targets, transport).arrays;
    for (const NamedArray& array : arrays) EXPECT_EQ(testing::mismatch(array, 4), "");
  });
  expect_error_naming(verify_error(dir / "c"), ErrorCode::kChecksumMismatch,
                      {"\"opt.m\"", "chunk 0", "block 5", chunk.file});
  write_file(file, good);
  EXPECT_FALSE(verify_error(dir / "c").has_value());
}

TEST(CheckpointDamage, TruncatedOrDeletedDataFilesAreNamed) {
  TempDir dir;
  save(dir / "c", 1);
  const checkpoint::Manifest manifest = checkpoint::Reader::open(dir / "c").manifest();
  for (const checkpoint::DataFile& data : manifest.files) {
    const fs::path file = dir / "c" / data.name;
    const std::string good = read_file(file);
    write_file(file, good.substr(0, good.size() - 3));
    expect_error_naming(restore_error(dir / "c"), file_rule::kIncompleteBuffer, {data.name, "truncated", "chunk"});
    fs::remove(file);
    expect_error_naming(restore_error(dir / "c"), ErrorCode::kIo, {data.name, "missing", "chunk"});
    write_file(file, good);
  }
  fs::remove(dir / "c" / "manifest.json");
  expect_error_naming(restore_error(dir / "c"), ErrorCode::kIo, {"manifest.json"});
}

TEST(CheckpointDamage, AnEditedManifestIsRefused) {
  TempDir dir;
  save(dir / "c", 1);
  const fs::path path = dir / "c" / "manifest.json";
  const std::string good = read_file(path);
  // Any change to the body breaks its checksum.
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"\"F32\"", "\"I32\""}, {"\"length\":", "\"length\":1"}, {"\"embed\"", "\"embez\""}}) {
    const size_t at = good.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    std::string edited = good;
    edited.replace(at, from.size(), to);
    write_file(path, edited);
    expect_error_naming(restore_error(dir / "c"), ErrorCode::kChecksumMismatch, {"manifest.json", "checksum"});
  }
  // An unknown version is refused by name, whatever the body.
  std::string newer = good;
  newer.replace(newer.find("\"version\":2"), 11, "\"version\":3");
  write_file(path, newer);
  expect_error_naming(restore_error(dir / "c"), file_rule::kInvalidManifest, {"version 3"});
  write_file(path, "{\"format\": \"reshard-checkpoint\"");
  expect_error_naming(restore_error(dir / "c"), file_rule::kInvalidManifest, {"JSON"});
  write_file(path, good);
  EXPECT_FALSE(restore_error(dir / "c").has_value());
}

// Runs `body` in a child process; returns its exit status (128 + signal).
template <typename Body>
int in_child(Body&& body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    int code = 1;
    try {
      code = body();
    } catch (...) {
      code = 3;
    }
    ::_exit(code);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// A file-size limit stands in for a full disk: the process writing the
// larger data file fails, the other learns of it, and the old checkpoint stays.
TEST(CheckpointDamage, AFullDiskFailsTheSaveEverywhereAndKeepsTheOldOne) {
  TempDir dir;
  save(dir / "c", 1);
  const int status = in_child([&] {
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{4096, 4096};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    // Process 0 writes a small data file, process 1 one past the limit.
    const Topology topology = Topology::uniform(2, 2);
    std::vector<int> codes(2, -1);
    std::vector<std::string> messages(2);
    const auto fill = [](std::span<const int64_t>, std::span<std::byte> out) {
      std::fill(out.begin(), out.end(), std::byte{1});
    };
    testing::run_ranks(2, [&](Transport& transport) {
      std::vector<NamedArray> arrays;
      arrays.push_back({"small", ShardedArray::from_function({16}, DType::kF32, NamedSharding(Mesh({{"x", 1}}, {0}), PartitionSpec()),
                                                             topology, transport.rank(), fill)});
      arrays.push_back({"big", ShardedArray::from_function({2048}, DType::kF32, NamedSharding(Mesh({{"x", 1}}, {1}), PartitionSpec()),
                                                           topology, transport.rank(), fill)});
      try {
        SaveOptions replacing;
        replacing.replace = true;
        save_checkpoint(arrays, dir / "c", transport, replacing);
      } catch (const Error& e) {
        codes[static_cast<size_t>(transport.rank())] = static_cast<int>(e.code());
        messages[static_cast<size_t>(transport.rank())] = e.what();
      }
    });
    const bool named = messages[0].find("process 1") != std::string::npos &&
                       messages[1].find("data-00001.safetensors") != std::string::npos;
    if (codes[0] != static_cast<int>(ErrorCode::kPeerFailed) || codes[1] != static_cast<int>(ErrorCode::kIo) || !named) {
      std::fprintf(stderr, "rank 0: %d: %s\nrank 1: %d: %s\n", codes[0], messages[0].c_str(), codes[1],
                   messages[1].c_str());
      return 10;
    }
    return 0;
  });
  EXPECT_EQ(status, 0) << "process 1 fails with an I/O error, process 0 names it";
  EXPECT_FALSE(restore_error(dir / "c").has_value()) << "the old checkpoint restores";
  for (const auto& entry : fs::directory_iterator(dir.path())) EXPECT_EQ(entry.path().filename(), "c");
}

// Which version the checkpoint under `path` holds whole: `committed`,
// `version`, or 0 for neither.
uint64_t whole_version(const fs::path& path, uint64_t committed, uint64_t version) {
  const LayoutDef one{Mesh({{"x", 4}}, {0, 1, 2, 3}), {}, 1};
  bool is_old = true, is_new = true;
  testing::run_ranks(1, [&](Transport& transport) {
    const auto arrays = restore_checkpoint(path, testing::targets_for(testing::small_model(), one), transport).arrays;
    for (const NamedArray& array : arrays) {
      is_old = is_old && testing::mismatch(array, committed).empty();
      is_new = is_new && testing::mismatch(array, version).empty();
    }
  });
  return is_old ? committed : is_new ? version : 0;
}

// A save killed part-way leaves the previous checkpoint whole under its name,
// never a partial one; a save not killed puts the new one there. Each kill
// lands mid-save, not by the clock's luck: the save is stopped (SIGSTOP) at a
// random moment after its staging folder appeared, and killed only where,
// stopped, it has not committed (the old checkpoint is still there); a save
// stopped past its commit runs on to its end and counts as one that finished.
TEST(CheckpointDamage, ASaveKilledMidSaveAlwaysLeavesThePreviousCheckpoint) {
  const uint64_t seed = testing::test_seed();
  std::mt19937_64 rng(seed);
  TempDir dir;
  save(dir / "c", 1);
  const fs::path staging = dir / ".c.tmp-reshard-ckpt";
  uint64_t committed = 1;
  constexpr int kKills = 30;
  int kills = 0, finished = 0;
  for (int attempt = 0; kills < kKills && attempt < 20 * kKills; ++attempt) {
    const uint64_t version = 100 + static_cast<uint64_t>(attempt);
    std::error_code ec;
    fs::remove_all(staging, ec);  // a killed save's: this save's staging is the one seen next
    const pid_t pid = ::fork();
    if (pid == 0) {
      try {
        save(dir / "c", version, kBlockBytes, /*replace=*/true);
      } catch (...) {
        ::_exit(2);
      }
      ::_exit(0);
    }
    int status = 0;
    bool ended = false;
    while (!fs::exists(staging) && !ended) {
      ended = ::waitpid(pid, &status, WNOHANG) == pid;
      std::this_thread::yield();
    }
    if (!ended) {
      ::usleep(static_cast<useconds_t>(rng() % 3000));
      ::kill(pid, SIGSTOP);
      ASSERT_EQ(::waitpid(pid, &status, WUNTRACED), pid);
      ended = !WIFSTOPPED(status);
    }
    if (!ended && whole_version(dir / "c", committed, version) == committed) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      ++kills;
      ASSERT_EQ(whole_version(dir / "c", committed, version), committed)
          << "a save killed mid-way (attempt " << attempt << ", seed " << seed << ") left no whole old checkpoint";
    } else {
      if (!ended) {
        ::kill(pid, SIGCONT);
        ::waitpid(pid, &status, 0);
      }
      ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "attempt " << attempt << ": the save failed";
      ++finished;
      ASSERT_EQ(whole_version(dir / "c", committed, version), version)
          << "a finished save (attempt " << attempt << ", seed " << seed << ") did not leave its checkpoint";
      committed = version;
    }
    for (const auto& entry : fs::directory_iterator(dir.path())) {
      const std::string name = entry.path().filename().string();
      EXPECT_TRUE(name == "c" || name.front() == '.') << "visible partial output: " << name;
    }
  }
  std::printf("[ kills    ] %d saves killed mid-way, %d finished (seed %llu)\n", kills, finished,
              static_cast<unsigned long long>(seed));
  EXPECT_EQ(kills, kKills) << "saves ran too fast to be stopped mid-way";
}

}  // namespace
}  // namespace reshard
