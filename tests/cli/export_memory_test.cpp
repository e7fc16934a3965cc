// `reshard export`'s peak memory: on a model many times its block size, a
// process holds a few blocks beside what it needs anyway, not the model.
#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "cli/support/run_reshard.h"
#include "formats/hf_folder_writer.h"
#include "reshard/formats/safetensors_writer.h"

namespace reshard {

using formats_detail::write_produced_file;

namespace {

namespace fs = std::filesystem;
using testing::peak_rss_kib;
using testing::run_reshard;
using testing::TempFolder;

constexpr int kTensors = 4;

// A checkpoint (made by `reshard convert`, sharded over 4 devices) of
// kTensors stacked [layers, rows, cols] f32 tensors, written from a 1 MiB
// buffer so that the test process itself stays small (a child's peak RSS
// counts its parent's until exec).
void write_checkpoint(const TempFolder& dir, const std::string& name, int64_t layers, int64_t rows, int64_t cols) {
  std::vector<safetensors::TensorSpec> specs;
  for (int t = 0; t < kTensors; ++t) {
    specs.push_back({fmt::format("stack.w{}", t), DType::kF32, safetensors::dims_of({layers, rows, cols})});
  }
  const std::vector<std::byte> chunk(size_t{1} << 20, std::byte{7});
  const fs::path source = dir / (name + ".safetensors");
  write_produced_file(source, safetensors::FileLayout::plan(specs), [&](const safetensors::TensorInfo& tensor,
                                                                        const ByteSink& sink) {
    for (uint64_t left = tensor.byte_size(); left > 0;) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(left, chunk.size()));
      sink(std::span(chunk).first(n));
      left -= n;
    }
  });
  const auto converted = run_reshard({"convert", source.string(), (dir / name).string(), "--mesh", "data=2,model=2",
                                      "--devices", "0,2,1,3", "--best-effort", "model"});
  ASSERT_EQ(converted.exit_code, 0) << converted.err;
  fs::remove(source);
}

// 256 MiB in 64 output tensors of 4 MiB (each one block): the export's peak
// beyond that of exporting a tiny model stays within a few blocks.
TEST(ExportCommand, PeakMemoryIsAFewBlocksNotTheModel) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer's quarantine keeps freed memory resident: peak RSS says nothing here";
#endif
  TempFolder dir;
  const int64_t layers = 16, rows = 256, cols = 4096;
  write_checkpoint(dir, "tiny", 2, 4, 16);
  write_checkpoint(dir, "big", layers, rows, cols);
  testing::write_bytes(dir / "map.json", R"({"rules": [{"from": "stack.{name}", "to": "model.layers.{layer}.{name}.weight",
                                             "rearrange": "layer rows cols -> rows cols"}]})");
  const auto exported = [&](const std::string& name) {
    return peak_rss_kib({"export", (dir / name).string(), (dir / (name + "-hf")).string(), "--map",
                         (dir / "map.json").string()});
  };
  const long tiny = exported("tiny");
  const long big = exported("big");
  ASSERT_GT(tiny, 0);
  ASSERT_GT(big, 0);
  const long block_kib = rows * cols * 4 / 1024, model_kib = block_kib * layers * kTensors;
  std::cout << "[ figures  ] export peak RSS " << big << " KiB, on a tiny model " << tiny << " KiB; model "
            << model_kib << " KiB, block " << block_kib << " KiB\n";
  EXPECT_TRUE(fs::exists(dir / "big-hf" / "model.safetensors"));
  // Two blocks in flight (one produced, one written), plus room for the allocator.
  EXPECT_LT(big - tiny, 4 * block_kib) << "peak grew by " << big - tiny << " KiB";
  EXPECT_LT(big - tiny, model_kib / 16);
}

}  // namespace
}  // namespace reshard
