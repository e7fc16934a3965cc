// Streaming and positional writers: the same bytes either way, nothing at the
// final path until commit, typed errors for misuse and failing storage.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <thread>

#include <fmt/format.h>

#include "formats/atomic_file.h"
#include "formats/support/random_tensors.h"
#include "formats/support/safetensors_files.h"
#include "reshard/formats/safetensors_reader.h"
#include "reshard/formats/safetensors_writer.h"
#include "reshard/layout/error.h"
#include "reshard/storage/open_store.h"
#include "storage/support/store_servers.h"
#include "support/error_of.h"
#include "support/file_size_limit.h"
#include "support/seed.h"

namespace reshard::safetensors {

using formats_detail::AtomicFile;
using formats_detail::temporary_sibling;
using formats_detail::write_file_atomically;

namespace {

using testing::FileSizeLimit;
using testing::RandomTensor;
using testing::ScratchDir;
using testing::error_of;

std::vector<TensorSpec> specs_of(const std::vector<RandomTensor>& tensors) {
  std::vector<TensorSpec> specs;
  for (const RandomTensor& t : tensors) specs.push_back(t.spec);
  return specs;
}

const RandomTensor& find(const std::vector<RandomTensor>& tensors, const std::string& name) {
  return *std::find_if(tensors.begin(), tensors.end(), [&](const RandomTensor& t) { return t.spec.name == name; });
}

std::vector<RandomTensor> sample_tensors(std::mt19937_64& rng) {
  return {{{"embed", DType::kBF16, {64, 33}}, testing::random_bytes(rng, 64 * 33 * 2)},
          {{"w.0", DType::kF32, {17, 5, 3}}, testing::random_bytes(rng, 17 * 5 * 3 * 4)},
          {{"bias", DType::kF64, {29}}, testing::random_bytes(rng, 29 * 8)},
          {{"mask", DType::kBool, {101}}, testing::random_bytes(rng, 101)},
          {{"empty", DType::kI32, {0, 4}}, {}},
          {{"q4", DType::kF4, {6, 10}}, testing::random_bytes(rng, 30)}};
}

std::string streamed_file(const std::filesystem::path& path, const std::vector<RandomTensor>& tensors) {
  write_file(path, testing::as_tensor_data(tensors));
  return testing::read_file_text(path);
}

TEST(SafetensorsWriter, StreamingInPiecesOfAnySizeGivesTheSameFile) {
  std::mt19937_64 rng = testing::seeded_rng();
  const std::vector<RandomTensor> tensors = sample_tensors(rng);
  ScratchDir dir;
  const std::string expected = streamed_file(dir / "whole.safetensors", tensors);
  for (size_t buffer : {size_t{1}, size_t{4096}, size_t{1} << 20}) {
    StreamWriter writer(dir / "pieces.safetensors", FileLayout::plan(specs_of(tensors)), buffer);
    while (const TensorInfo* next = writer.next_tensor()) {
      const std::vector<std::byte>& bytes = find(tensors, next->name).bytes;
      for (size_t at = 0; at < bytes.size();) {
        const size_t piece = std::min<size_t>(bytes.size() - at, 1 + rng() % 5000);
        writer.write(std::span(bytes).subspan(at, piece));
        at += piece;
      }
    }
    writer.commit();
    EXPECT_EQ(testing::read_file_text(dir / "pieces.safetensors"), expected) << "buffer " << buffer;
  }
}

TEST(SafetensorsWriter, ThreadsWritingInterleavedRangesGiveTheStreamedFile) {
  std::mt19937_64 rng = testing::seeded_rng();
  const std::vector<RandomTensor> tensors = sample_tensors(rng);
  ScratchDir dir;
  const std::string expected = streamed_file(dir / "streamed.safetensors", tensors);

  // Every tensor cut into ranges of random sizes, shuffled, dealt to threads.
  struct Range {
    std::string name;
    uint64_t offset;
    std::span<const std::byte> bytes;
  };
  std::vector<Range> ranges;
  for (const RandomTensor& t : tensors) {
    for (size_t at = 0; at < t.bytes.size();) {
      const size_t piece = std::min<size_t>(t.bytes.size() - at, 1 + rng() % 300);
      ranges.push_back({t.spec.name, at, std::span(t.bytes).subspan(at, piece)});
      at += piece;
    }
  }
  std::shuffle(ranges.begin(), ranges.end(), rng);

  const auto path = dir / "parallel.safetensors";
  PositionalWriter creator = PositionalWriter::create(path, FileLayout::plan(specs_of(tensors)));
  constexpr size_t kThreads = 4;
  std::vector<std::thread> threads;
  for (size_t k = 0; k < kThreads; ++k) {
    threads.emplace_back([&, k] {
      // Thread 0 writes through the creator's writer; the others join as
      // another process would, with their own descriptor and layout.
      std::optional<PositionalWriter> joined;
      if (k > 0) joined.emplace(PositionalWriter::join(path, FileLayout::plan(specs_of(tensors))));
      const PositionalWriter& writer = joined ? *joined : creator;
      for (size_t i = k; i < ranges.size(); i += kThreads) writer.write(ranges[i].name, ranges[i].offset, ranges[i].bytes);
      writer.sync();
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_FALSE(std::filesystem::exists(path)) << "visible before commit";
  creator.commit();
  EXPECT_EQ(testing::read_file_text(path), expected);
  EXPECT_FALSE(std::filesystem::exists(temporary_sibling(path)));
}

TEST(SafetensorsWriter, ShardsWrittenAsBoxesGiveTheStreamedFile) {
  std::mt19937_64 rng = testing::seeded_rng();
  const std::vector<RandomTensor> tensors = sample_tensors(rng);
  ScratchDir dir;
  const std::string expected = streamed_file(dir / "streamed.safetensors", tensors);
  const auto path = dir / "sharded.safetensors";
  PositionalWriter writer = PositionalWriter::create(path, FileLayout::plan(specs_of(tensors)));
  const File source = File::open(dir / "streamed.safetensors");
  for (const RandomTensor& t : tensors) {
    // Column shards of the last dimension (two per row for F4: whole bytes only).
    const Shape shape = layout_shape(t.spec.shape, t.spec.name);
    const int64_t last = shape.back();
    for (int64_t begin = 0; begin < last;) {
      const int64_t width = t.spec.dtype == DType::kF4 ? std::min<int64_t>(2, last - begin) : 1 + static_cast<int64_t>(rng() % 3);
      std::vector<int64_t> origin(shape.size(), 0);
      Shape extent = shape;
      origin.back() = begin;
      extent.back() = std::min(width, last - begin);
      const Box shard(origin, extent);
      std::vector<std::byte> bytes(File::box_bytes(t.spec.dtype, shard));
      source.read_box(source.tensor(t.spec.name), shard, bytes);
      writer.write_box(t.spec.name, shard, bytes);
      begin += extent.back();
    }
  }
  writer.commit();
  EXPECT_EQ(testing::read_file_text(path), expected);
}

TEST(SafetensorsWriter, StreamsToAnObjectInPartsAsItDoesToAFile) {
  std::mt19937_64 rng = testing::seeded_rng();
  const std::vector<RandomTensor> tensors = sample_tensors(rng);
  ScratchDir dir;
  const std::string expected = streamed_file(dir / "local.safetensors", tensors);
  const storage::Location prefix = storage::Location::parse("memory://writer/" + testing::unique_prefix());
  const std::shared_ptr<storage::Store> store = storage::open_store(prefix);
  for (const uint64_t part : {uint64_t{1024}, uint64_t{0}}) {  // many parts, and one
    const storage::Location object = prefix.child(fmt::format("parts-{}.safetensors", part));
    StreamWriter writer(object, FileLayout::plan(specs_of(tensors)), 4096, storage::UploadOptions{part, 2});
    while (const TensorInfo* next = writer.next_tensor()) {
      const std::vector<std::byte>& bytes = find(tensors, next->name).bytes;
      for (size_t at = 0; at < bytes.size();) {
        const size_t piece = std::min<size_t>(bytes.size() - at, 1 + rng() % 3000);
        writer.write(std::span(bytes).subspan(at, piece));
        at += piece;
      }
    }
    EXPECT_FALSE(store->stat(object).has_value());  // nothing appears before commit
    writer.commit();
    EXPECT_EQ(store->read_all(object, expected.size()), expected);
  }
  {
    const storage::Location object = prefix.child("abandoned.safetensors");
    StreamWriter writer(object, FileLayout::plan(specs_of(tensors)), 4096, storage::UploadOptions{1024, 2});
    writer.write(std::span(tensors[0].bytes).first(3000));  // some parts uploaded
  }
  EXPECT_FALSE(store->stat(prefix.child("abandoned.safetensors")).has_value());
  EXPECT_EQ(store->abort_stale_uploads(prefix.child("abandoned.safetensors")), 0u);  // the upload was aborted
}

TEST(SafetensorsWriter, AbandonedWritersLeaveNothingBehind) {
  ScratchDir dir;
  const auto path = dir / "abandoned.safetensors";
  const std::vector<std::byte> bytes(16, std::byte{1});
  {
    StreamWriter writer(path, FileLayout::plan({{"t", DType::kF32, {4}}}));
    writer.write(std::span(bytes).first(8));
    // The bytes go to a hidden sibling of the file until commit.
    const auto staging = std::filesystem::directory_iterator(dir.path())->path().filename().string();
    EXPECT_TRUE(staging.starts_with(".abandoned.safetensors.tmp-reshard-")) << staging;
    EXPECT_FALSE(std::filesystem::exists(path));
    const std::optional<Error> early = error_of([&] { writer.commit(); });
    ASSERT_TRUE(early.has_value());
    EXPECT_EQ(early->code(), ErrorCode::kInvalidArgument);
  }
  {
    PositionalWriter writer = PositionalWriter::create(path, FileLayout::plan({{"t", DType::kF32, {4}}}));
    writer.write("t", 0, bytes);
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(SafetensorsWriter, CommitReplacesAnOldFileWhole) {
  ScratchDir dir;
  const auto path = dir / "model.safetensors";
  testing::write_file_text(path, "old contents");
  const std::vector<std::byte> bytes(4, std::byte{9});
  {
    StreamWriter writer(path, FileLayout::plan({{"t", DType::kU8, {4}}}));
    writer.write_tensor("t", bytes);
    EXPECT_EQ(testing::read_file_text(path), "old contents");
  }
  EXPECT_EQ(testing::read_file_text(path), "old contents");
  write_file(path, std::vector<TensorData>{{{"t", DType::kU8, {4}}, bytes}});
  EXPECT_EQ(File::open(path).tensor("t").byte_size(), 4u);
}

TEST(SafetensorsWriter, MisuseIsATypedError) {
  ScratchDir dir;
  const auto path = dir / "misuse.safetensors";
  const std::vector<std::byte> four(4), eight(8);
  const FileLayout layout = FileLayout::plan({{"a", DType::kU8, {4}}, {"b", DType::kF32, {2}}});
  StreamWriter stream(path, layout);
  EXPECT_EQ(error_of([&] { stream.write_tensor("a", four); })->code(), ErrorCode::kInvalidArgument);  // b is first
  EXPECT_EQ(error_of([&] { stream.write_tensor("b", four); })->code(), ErrorCode::kInvalidArgument);  // wrong size
  EXPECT_EQ(error_of([&] { stream.write_tensor("c", four); })->code(), ErrorCode::kMissingTensor);
  stream.write_tensor("b", eight);
  EXPECT_EQ(stream.next_tensor()->name, "a");
  EXPECT_EQ(error_of([&] { stream.write(eight); })->code(), ErrorCode::kInvalidArgument);  // past the end
  stream.write_tensor("a", four);
  EXPECT_EQ(stream.next_tensor(), nullptr);
  stream.commit();

  const auto other = dir / "positional.safetensors";
  EXPECT_EQ(error_of([&] { PositionalWriter::join(other, layout); })->code(), ErrorCode::kIo);
  PositionalWriter creator = PositionalWriter::create(other, layout);
  EXPECT_EQ(error_of([&] { creator.write("a", 1, four); })->code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_of([&] { creator.write("zz", 0, four); })->code(), ErrorCode::kMissingTensor);
  EXPECT_EQ(error_of([&] { creator.write_box("b", Box({0}, {1}), eight); })->code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_of([&] { PositionalWriter::join(other, FileLayout::plan({{"a", DType::kU8, {5}}})); })->code(),
            ErrorCode::kInvalidArgument);
  PositionalWriter participant = PositionalWriter::join(other, layout);
  EXPECT_EQ(error_of([&] { participant.commit(); })->code(), ErrorCode::kInvalidArgument);
  creator.commit();
  EXPECT_EQ(error_of([&] { creator.commit(); })->code(), ErrorCode::kInvalidArgument);
}

TEST(SafetensorsWriter, MissingOrUnwritableFoldersAreIoErrorsNamingTheFile) {
  ScratchDir dir;
  const std::vector<std::byte> bytes(4);
  testing::write_file_text(dir / "plain-file", "x");
  std::vector<std::filesystem::path> targets = {dir / "plain-file" / "m.safetensors"};
  if (::geteuid() != 0) {  // root writes anywhere: permissions cannot be tested as root
    std::filesystem::create_directory(dir / "read-only");
    std::filesystem::permissions(dir / "read-only", std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
    targets.push_back(dir / "read-only" / "m.safetensors");
  }
  for (const auto& path : targets) {
    SCOPED_TRACE(path.string());
    const auto stream = error_of([&] { write_file(path, std::vector<TensorData>{{{"t", DType::kU8, {4}}, bytes}}); });
    const auto positional = error_of([&] { PositionalWriter::create(path, FileLayout::plan({{"t", DType::kU8, {4}}})); });
    for (const auto& error : {stream, positional}) {
      ASSERT_TRUE(error.has_value());
      EXPECT_EQ(error->code(), ErrorCode::kIo);
      EXPECT_NE(std::string(error->what()).find("m.safetensors"), std::string::npos) << error->what();
    }
    EXPECT_FALSE(std::filesystem::exists(path));
  }
  // Missing folders: the positional writer's temporary has none to go in; the
  // stream writer, as the storage layer does for every file, creates them.
  const auto missing = dir / "no" / "such" / "folder" / "m.safetensors";
  const auto positional = error_of([&] { PositionalWriter::create(missing, FileLayout::plan({{"t", DType::kU8, {4}}})); });
  ASSERT_TRUE(positional.has_value());
  EXPECT_EQ(positional->code(), ErrorCode::kIo);
  write_file(missing, std::vector<TensorData>{{{"t", DType::kU8, {4}}, bytes}});
  EXPECT_EQ(File::open(missing).tensor("t").byte_size(), 4u);
}

TEST(SafetensorsWriter, AWriteFailingPartwayIsAnIoErrorAndLeavesNoFile) {
  ScratchDir dir;
  const auto path = dir / "full.safetensors";
  const std::vector<std::byte> bytes(1 << 20, std::byte{3});
  const std::vector<TensorSpec> specs = {{"big", DType::kU8, {1 << 20}}};
  std::optional<Error> stream, positional;
  {
    FileSizeLimit limit(64 << 10);
    stream = error_of([&] { write_file(path, std::vector<TensorData>{{specs[0], bytes}}); });
    positional = error_of([&] {
      PositionalWriter writer = PositionalWriter::create(path, FileLayout::plan(specs));
      writer.write("big", 0, bytes);
      writer.commit();
    });
  }
  for (const auto& error : {stream, positional}) {
    ASSERT_TRUE(error.has_value());
    EXPECT_EQ(error->code(), ErrorCode::kIo);
    EXPECT_NE(std::string(error->what()).find("full.safetensors"), std::string::npos) << error->what();
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(AtomicFile, TemporarySiblingIsHiddenBesideTheFile) {
  EXPECT_EQ(temporary_sibling("/data/model.safetensors"), "/data/.model.safetensors.tmp-reshard");
  EXPECT_EQ(temporary_sibling("model.safetensors"), ".model.safetensors.tmp-reshard");
  EXPECT_THROW(temporary_sibling("/data/"), Error);
}

TEST(AtomicFile, WriteFileAtomicallyReplacesContents) {
  ScratchDir dir;
  write_file_atomically(dir / "index.json", "first");
  write_file_atomically(dir / "index.json", "second");
  EXPECT_EQ(testing::read_file_text(dir / "index.json"), "second");
  EXPECT_FALSE(std::filesystem::exists(temporary_sibling(dir / "index.json")));
}

}  // namespace
}  // namespace reshard::safetensors
