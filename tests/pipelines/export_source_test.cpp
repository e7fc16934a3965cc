// export_source: tensors read through a caller's function export to the same
// bytes as the same tensors saved as a reshard checkpoint, and a failing read
// fails every process, naming the tensor.
#include <algorithm>
#include <atomic>
#include <stdexcept>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "execute/support/rank_threads.h"
#include "layout/support/expect_error.h"
#include "pipelines/support/export_files.h"
#include "pipelines/support/sub_box.h"
#include "reshard/pipelines/export_model.h"
#include "support/seed.h"
#include "support/temp_dir.h"

namespace reshard {
namespace {

namespace fs = std::filesystem;

class ExportSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::mt19937_64 rng = testing::seeded_rng();
    model_ = testing::levanter_model(dims_, DType::kBF16, rng);
    testing::save_levanter_checkpoint(
        model_, dir_ / "ckpt", safetensors::Metadata{{std::string(kLoraConfigMetadataKey), lora_config_json(testing::levanter_lora_config())}});
    for (const testing::FrameworkTensor& tensor : model_) {
      std::vector<uint64_t> dims(tensor.shape.begin(), tensor.shape.end());
      source_.specs.push_back({tensor.name, tensor.dtype, dims});
      bytes_.push_back(tensor.bytes());
    }
    source_.read = [this](size_t source, const Box& box, std::span<std::byte> out) {
      ++reads_;
      const testing::FrameworkTensor& tensor = model_.at(source);
      const std::vector<std::byte> part =
          testing::sub_box(bytes_[source], tensor.shape, box, static_cast<size_t>(dtype_byte_size(tensor.dtype, 1)));
      std::copy(part.begin(), part.end(), out.begin());
    };
  }

  testing::LevanterDims dims_;
  std::vector<testing::FrameworkTensor> model_;
  std::vector<std::vector<std::byte>> bytes_;
  TensorSource source_;
  std::atomic<size_t> reads_ = 0;
  testing::TempDir dir_;
};

TEST_F(ExportSourceTest, WritesTheCheckpointExportsBytes) {
  const TensorMap map = *tensor_map_preset("levanter-llama");
  for (const ExportKind kind : {ExportKind::kModel, ExportKind::kAdapterOnly, ExportKind::kMergedModel}) {
    for (const int ranks : {1, 3}) {
      SCOPED_TRACE(::testing::Message() << "kind " << static_cast<int>(kind) << ", " << ranks << " processes");
      ExportOptions options;
      options.kind = kind;
      options.block_bytes = 64;  // several blocks per tensor, spread over the processes
      const fs::path expected = dir_ / fmt::format("ckpt-{}-{}", static_cast<int>(kind), ranks);
      const fs::path got = dir_ / fmt::format("source-{}-{}", static_cast<int>(kind), ranks);
      testing::run_ranks(ranks, [&](Transport& transport) {
        export_checkpoint(dir_ / "ckpt", expected, map, transport, options);
      });
      options.lora_config = testing::levanter_lora_config();  // the checkpoint's metadata holds it; a source has none
      reads_ = 0;
      testing::run_ranks(ranks, [&](Transport& transport) { export_source(source_, got, map, transport, options); });
      EXPECT_GT(reads_.load(), 0u);
      EXPECT_EQ(testing::read_folder_files(got), testing::read_folder_files(expected));
    }
  }
}

TEST_F(ExportSourceTest, AFailedReadFailsEveryProcessNamingTheTensor) {
  TensorSource failing = source_;
  failing.read = [&](size_t source, const Box& box, std::span<std::byte> out) {
    if (model_.at(source).name.find("q_proj") != std::string::npos) throw std::runtime_error("the store said no");
    source_.read(source, box, out);
  };
  std::atomic<int> own = 0;
  testing::run_ranks(3, [&](Transport& transport) {
    try {
      export_source(failing, dir_ / "out", *tensor_map_preset("levanter-llama"), transport);
      ADD_FAILURE() << "process " << transport.rank() << " succeeded";
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("the store said no"), std::string::npos) << message;
      EXPECT_NE(message.find("q_proj"), std::string::npos) << message;
      if (e.code() == ErrorCode::kIo) {
        ++own;
      } else {
        EXPECT_EQ(e.code(), ErrorCode::kPeerFailed) << message;
      }
    }
  });
  EXPECT_GE(own.load(), 1);
  EXPECT_FALSE(fs::exists(dir_ / "out"));
}

TEST_F(ExportSourceTest, NeedsAReadFunction) {
  TensorSource empty{source_.specs, {}};
  EXPECT_TRUE(testing::throws_error(
      [&] { testing::run_ranks(1, [&](Transport& t) { export_source(empty, dir_ / "out", *tensor_map_preset("levanter-llama"), t); }); },
      ErrorCode::kInvalidArgument, {"no read function"}));
}

}  // namespace
}  // namespace reshard
