// Converting a file to a checkpoint streams it: each process reads the
// chunks it writes piece by piece, never holding more than its staging
// budget, and the checkpoint holds the file's bytes exactly.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <mutex>
#include <vector>

#include "execute/support/rank_threads.h"
#include "layout/float_convert.h"
#include "reshard/formats/checkpoint_reader.h"
#include "reshard/formats/safetensors_reader.h"
#include "reshard/formats/safetensors_writer.h"
#include "reshard/pipelines/convert.h"
#include "support/seed.h"
#include "support/temp_dir.h"

namespace reshard {

using layout_detail::convert_floats;

namespace {

namespace fs = std::filesystem;

// A file of a 64 KiB matrix, a vector and a scalar, random bytes.
void write_source(const fs::path& path) {
  auto rng = testing::seeded_rng();
  const std::vector<safetensors::TensorSpec> specs = {
      {"w", DType::kF32, {128, 128}}, {"b", DType::kF32, {96}}, {"s", DType::kI64, {}}};
  std::vector<std::vector<std::byte>> bytes;
  std::vector<safetensors::TensorData> data;
  for (const auto& spec : specs) {
    uint64_t n = 1;
    for (uint64_t d : spec.shape) n *= d;
    std::vector<std::byte> b(static_cast<size_t>(n) * element_bytes(spec.dtype));
    // Small floats: a cast to BF16 is exact where the low bits are zero.
    for (size_t i = 0; i < b.size(); ++i) b[i] = i % 4 < 2 ? std::byte{0} : static_cast<std::byte>(rng() & 0x3F);
    bytes.push_back(std::move(b));
  }
  for (size_t i = 0; i < specs.size(); ++i) data.push_back({specs[i], bytes[i]});
  safetensors::write_file(path, data);
}

CheckpointLayout layout_of(int processes) {
  CheckpointLayout layout{Mesh({{"x", 2 * processes}}, [&] {
                            std::vector<DeviceId> devices;
                            for (int d = 0; d < 2 * processes; ++d) devices.push_back(d);
                            return devices;
                          }()),
                          Topology::uniform(2 * processes, processes), {}, std::string("x")};
  return layout;
}

std::vector<ConvertResult> convert_on(int processes, const fs::path& src, const fs::path& dst, ConvertOptions options) {
  std::mutex mutex;
  std::vector<ConvertResult> results(static_cast<size_t>(processes));
  options.output = ConvertOutput::kCheckpoint;
  options.layout = layout_of(processes);
  testing::run_ranks(processes, [&](Transport& transport) {
    const ConvertResult result = convert_model(src, dst, transport, options);
    std::lock_guard lock(mutex);
    results[static_cast<size_t>(transport.rank())] = result;
  });
  return results;
}

std::vector<std::byte> tensor_bytes(const safetensors::File& file, const std::string& name) {
  std::vector<std::byte> bytes(static_cast<size_t>(file.tensor(name).byte_size()));
  file.read(file.tensor(name), bytes);
  return bytes;
}

TEST(ConvertToCheckpoint, StreamsThroughItsStagingBudget) {
  testing::TempDir dir;
  write_source(dir / "src.safetensors");
  const safetensors::File source = safetensors::File::open(dir / "src.safetensors");
  for (const uint64_t budget : {uint64_t{4096}, uint64_t{1} << 30}) {
    SCOPED_TRACE(budget);
    const fs::path ck = dir / fmt::format("ck{}", budget);
    ConvertOptions options;
    options.staging_bytes = budget;
    const std::vector<ConvertResult> results = convert_on(2, dir / "src.safetensors", ck, options);
    for (const ConvertResult& result : results) {
      EXPECT_GT(result.peak_staged_bytes, 0u);
      EXPECT_LE(result.peak_staged_bytes, budget) << "never more staged than the budget";
    }
    // Under a large budget a 16 KiB chunk of w is one piece; under 4 KiB, a
    // quarter of it at most.
    if (budget > 4096) {
      EXPECT_GE(results[0].peak_staged_bytes, 16384u);
    }
    const checkpoint::Reader reader = checkpoint::Reader::open(ck);
    for (const std::string name : {"w", "b", "s"}) {
      const checkpoint::TensorEntry& tensor = reader.tensor(name);
      std::vector<std::byte> restored(static_cast<size_t>(checkpoint::dense_bytes(tensor.dtype, tensor.shape)));
      reader.read_box(tensor, Box::whole(tensor.shape), restored);
      EXPECT_EQ(restored, tensor_bytes(source, name)) << name;
    }
    EXPECT_EQ(reader.tensor("w").chunks.size(), 4u);
  }
}

TEST(ConvertToCheckpoint, CastsPieceByPiece) {
  testing::TempDir dir;
  write_source(dir / "src.safetensors");
  ConvertOptions options;
  options.staging_bytes = 1000;
  options.dtype = DType::kBF16;
  const std::vector<ConvertResult> results = convert_on(1, dir / "src.safetensors", dir / "ck", options);
  EXPECT_LE(results[0].peak_staged_bytes, 1000u);
  const safetensors::File source = safetensors::File::open(dir / "src.safetensors");
  const checkpoint::Reader reader = checkpoint::Reader::open(dir / "ck");
  const checkpoint::TensorEntry& w = reader.tensor("w");
  EXPECT_EQ(w.dtype, DType::kBF16);
  std::vector<std::byte> restored(static_cast<size_t>(checkpoint::dense_bytes(w.dtype, w.shape)));
  reader.read_box(w, Box::whole(w.shape), restored);
  const std::vector<std::byte> f32 = tensor_bytes(source, "w");
  std::vector<std::byte> expected(restored.size());
  convert_floats(DType::kF32, f32, DType::kBF16, expected, 128 * 128);
  EXPECT_EQ(restored, expected);
}

// The one rule the CLI and the Python API infer a conversion's output by.
TEST(ConvertOutputFor, ALayoutMakesACheckpointElseTheNameDecides) {
  testing::TempDir dir;
  EXPECT_EQ(convert_output_for(dir.path() / "w.safetensors", true), ConvertOutput::kCheckpoint);
  EXPECT_EQ(convert_output_for(dir.path() / "w.safetensors", false), ConvertOutput::kSafetensorsFile);
  EXPECT_EQ(convert_output_for(dir.path() / "hf", false), ConvertOutput::kHfFolder);
  fs::create_directories(dir.path() / "folder.safetensors");  // an existing folder stays a folder
  EXPECT_EQ(convert_output_for(dir.path() / "folder.safetensors", false), ConvertOutput::kHfFolder);
}

}  // namespace
}  // namespace reshard
