// The demo's reference and checks: bf16 rounding, the merge against the
// library's, and the folder checks passing on the reference's own files and
// failing on a changed bit, a missing tensor or a wrong config.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include <gtest/gtest.h>

#include "cli/support/run_reshard.h"
#include "demo/demo_export_checks.h"
#include "demo/demo_files.h"
#include "demo/demo_reference.h"
#include "pipelines/lora/merge_box.h"
#include "reshard/execute/in_process_transport.h"
#include "reshard/formats/safetensors_writer.h"
#include "reshard/layout/error.h"
#include "reshard/pipelines/lora_config.h"
#include "support/seed.h"

namespace reshard::demo {

using pipelines_detail::LoraDelta;
using pipelines_detail::LoraFactor;
using pipelines_detail::merge_lora_box;

namespace {

namespace fs = std::filesystem;

float float_of(uint32_t bits) {
  float value = 0;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// The reference's bytes of an HF tensor, little-endian as stored.
std::vector<std::byte> reference_bytes(const DemoModel& model, const HfTensor& t) {
  const size_t element = element_bytes(t.dtype);
  std::vector<std::byte> bytes(t.elements() * element);
  for (uint64_t i = 0; i < t.elements(); ++i) {
    const uint32_t bits = hf_element_bits(model, t, i);
    std::memcpy(bytes.data() + i * element, &bits, element);
  }
  return bytes;
}

void write_reference_file(const DemoModel& model, const std::vector<HfTensor>& tensors, const fs::path& path) {
  std::vector<std::vector<std::byte>> bytes;
  for (const HfTensor& t : tensors) bytes.push_back(reference_bytes(model, t));
  std::vector<safetensors::TensorData> data;
  for (size_t i = 0; i < tensors.size(); ++i) {
    data.push_back({{tensors[i].name, tensors[i].dtype, safetensors::dims_of(tensors[i].shape)}, bytes[i]});
  }
  safetensors::write_file(path, data);
}

const HfTensor& find(const std::vector<HfTensor>& tensors, const std::string& name) {
  for (const HfTensor& t : tensors) {
    if (t.name == name) return t;
  }
  throw std::runtime_error("no tensor " + name);
}

TEST(DemoReference, RoundsToBf16ToNearestEven) {
  EXPECT_EQ(round_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(round_to_bf16(1.0f + 0x1p-8f), 0x3F80);         // a tie, to the even 1.0
  EXPECT_EQ(round_to_bf16(1.0f + 3 * 0x1p-8f), 0x3F82);     // a tie, to the even above
  EXPECT_EQ(round_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3F81);  // above the tie
  EXPECT_EQ(round_to_bf16(-2.0f), 0xC000);
  EXPECT_EQ(round_to_bf16(float_of(0x7F7FFFFF)), 0x7F80);  // the largest float rounds up to infinity
  EXPECT_EQ(round_to_bf16(float_of(0x7F800000)), 0x7F80);
  const uint16_t nan = round_to_bf16(float_of(0x7F800001));  // a signalling NaN's payload is in the dropped bits
  EXPECT_EQ(nan & 0x7F80, 0x7F80);
  EXPECT_NE(nan & 0x7F, 0);
}

TEST(DemoReference, NamesAndShapesFollowHfPeft) {
  const DemoModel model = make_demo_model(ModelSizes{}, {"q_proj", "o_proj"});
  const std::vector<HfTensor> base = hf_model_tensors(model, false);
  EXPECT_EQ(base.size(), 1 + 9 * 2 + 2u);  // embeddings, 9 per layer, final norm, head
  EXPECT_EQ(find(base, "model.layers.1.self_attn.q_proj.weight").shape, (Shape{8 * 16, 128}));
  EXPECT_EQ(find(base, "model.layers.0.self_attn.k_proj.weight").shape, (Shape{4 * 16, 128}));
  EXPECT_EQ(find(base, "model.layers.0.self_attn.o_proj.weight").shape, (Shape{128, 8 * 16}));
  EXPECT_EQ(find(base, "model.layers.1.mlp.down_proj.weight").shape, (Shape{128, 256}));
  EXPECT_EQ(find(base, "model.layers.1.post_attention_layernorm.weight").dtype, DType::kF32);
  const std::vector<HfTensor> adapter = hf_adapter_tensors(model);
  EXPECT_EQ(adapter.size(), 2 * 2 * 2u);  // A and B of two modules in two layers
  EXPECT_EQ(find(adapter, "base_model.model.model.layers.1.self_attn.o_proj.lora_A.weight").shape,
            (Shape{8, 8 * 16}));
  EXPECT_EQ(find(adapter, "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight").shape,
            (Shape{8 * 16, 8}));
}

TEST(DemoReference, UnstackingIsTheLayersSlice) {
  const DemoModel model = make_demo_model(ModelSizes{}, llama_module_names());
  const std::vector<HfTensor> base = hf_model_tensors(model, false);
  const HfTensor& q1 = find(base, "model.layers.1.self_attn.q_proj.weight");
  const FrameworkTensor& q = model.tensors[q1.source];
  ASSERT_EQ(q.name, "transformer.layers.stacked.self_attn.q_proj.weight");
  // Row (kv 3, group 1, head_dim 5) of layer 1, column 7, by the framework's own shape [2, 4, 2, 16, 128].
  const uint64_t row = (3 * 2 + 1) * 16 + 5;
  const uint64_t framework_flat = (((1 * 4 + 3) * 2 + 1) * 16 + 5) * 128 + 7;
  EXPECT_EQ(hf_element_bits(model, q1, row * 128 + 7), element_bits(model, q, framework_flat));
}

// The reference merge equals the library's merge of the same factors, bit for
// bit, for an exact scaling and for one that rounds.
TEST(DemoReference, MergeEqualsTheLibrarys) {
  const uint64_t seed = testing::test_seed();
  for (const double alpha : {16.0, 10.0}) {
    ModelSizes sizes;
    sizes.seed = seed;
    sizes.rank = 3;
    sizes.alpha = alpha;
    const DemoModel model = make_demo_model(sizes, {"o_proj", "gate_proj"});
    const std::vector<HfTensor> merged = hf_model_tensors(model, true);
    const std::vector<HfTensor> base = hf_model_tensors(model, false);
    const std::vector<HfTensor> adapter = hf_adapter_tensors(model);
    for (const std::string module : {"model.layers.1.self_attn.o_proj", "model.layers.0.mlp.gate_proj"}) {
      const HfTensor& w = find(base, module + ".weight");
      const std::vector<std::byte> w_bytes = reference_bytes(model, w);
      const HfTensor& a = find(adapter, "base_model.model." + module + ".lora_A.weight");
      const HfTensor& b = find(adapter, "base_model.model." + module + ".lora_B.weight");
      const std::vector<std::byte> a_bytes = reference_bytes(model, a), b_bytes = reference_bytes(model, b);
      LoraDelta delta{LoraFactor::in_memory(DType::kF32, a.shape, a_bytes),
                      LoraFactor::in_memory(DType::kF32, b.shape, b_bytes), model.scaling(), false};
      std::vector<std::byte> out(w_bytes.size());
      merge_lora_box(delta, Box::whole(w.shape), DType::kBF16, w_bytes, DType::kBF16, out);
      EXPECT_EQ(out, reference_bytes(model, find(merged, module + ".weight"))) << module << " alpha " << alpha;
    }
  }
}

TEST(DemoReference, LoraFactorsAreExactInF32) {
  const DemoModel model = make_demo_model(ModelSizes{}, {"q_proj"});
  const FrameworkTensor& a = model.tensor(TensorKind::kLoraA, 0);
  for (uint64_t i = 0; i < a.elements(); ++i) {
    const float v = float_of(element_bits(model, a, i));
    EXPECT_EQ(v * 128, static_cast<float>(static_cast<int>(v * 128)));
    EXPECT_LT(std::abs(v), 0.125f);
  }
}

TEST(DemoModel, RejectsSizesThatDoNotFit) {
  ModelSizes sizes;
  sizes.heads = 6;  // 128 is not a multiple of 6
  EXPECT_THROW(make_demo_model(sizes, {}), Error);
  sizes = ModelSizes{};
  sizes.kv_heads = 3;
  EXPECT_THROW(make_demo_model(sizes, {}), Error);
  EXPECT_THROW(make_demo_model(ModelSizes{}, {"lm_head"}), Error);
  sizes = ModelSizes{};
  sizes.vocab = int64_t{1} << 40;
  EXPECT_THROW(make_demo_model(sizes, {}), Error);
}

// One process's context over a group of one, for the folder checks.
struct OneProcess {
  explicit OneProcess(DemoOptions o, const DemoModel& m)
      : options(std::move(o)), model(m), log(false, false, 1),
        ctx{model, options, group.transport(0), log, "", Topology::uniform(16, 1), Mesh(), Mesh()} {}
  DemoOptions options;
  const DemoModel& model;
  InProcessGroup group{1};
  DemoLog log;
  DemoContext ctx;
};

class DemoFolderCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    ModelSizes sizes;
    sizes.seed = testing::test_seed();
    sizes.layers = 1;
    model_ = make_demo_model(sizes, {"q_proj", "down_proj"});
    fs::create_directories(folder_.path() / "merged");
    fs::create_directories(folder_.path() / "adapter");
    write_reference_file(model_, hf_model_tensors(model_, true), folder_ / "merged/model.safetensors");
    testing::write_bytes(folder_ / "merged/config.json", hf_config_json(model_));
    write_reference_file(model_, hf_adapter_tensors(model_), folder_ / "adapter/adapter_model.safetensors");
    testing::write_bytes(folder_ / "adapter/adapter_config.json", lora_config_json(demo_lora_config(model_)));
  }

  CheckTally check_merged(const std::string& flip = "") {
    DemoOptions options;
    options.flip = flip;
    OneProcess one(options, model_);
    return check_model_folder(one.ctx, folder_ / "merged", true, "merged");
  }
  CheckTally check_adapter(const std::string& flip = "") {
    DemoOptions options;
    options.flip = flip;
    OneProcess one(options, model_);
    return check_adapter_folder(one.ctx, folder_ / "adapter", "adapter");
  }

  DemoModel model_;
  testing::TempFolder folder_;
};

TEST_F(DemoFolderCheck, PassesOnTheReferencesOwnFiles) {
  const CheckTally merged = check_merged();
  EXPECT_EQ(merged.tensors, hf_model_tensors(model_, true).size());
  EXPECT_EQ(merged.mismatches, 0u);
  const CheckTally adapter = check_adapter();
  EXPECT_EQ(adapter.tensors, 4u);
}

TEST_F(DemoFolderCheck, FailsOnOneFlippedBit) {
  try {
    check_merged("merged");
    FAIL() << "a flipped bit passed the check";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("check failed: the merged model"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("model.layers.0.self_attn.q_proj.weight element [0, 0]"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(check_adapter("adapter"), Error);
}

TEST_F(DemoFolderCheck, FailsOnAMissingTensorAndAWrongConfig) {
  std::vector<HfTensor> fewer = hf_model_tensors(model_, true);
  fewer.pop_back();
  write_reference_file(model_, fewer, folder_ / "merged/model.safetensors");
  try {
    check_merged();
    FAIL() << "a missing tensor passed the check";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor lm_head.weight is missing"), std::string::npos) << e.what();
  }
  LoraConfig config = demo_lora_config(model_);
  config.r = 4;
  testing::write_bytes(folder_ / "adapter/adapter_config.json", lora_config_json(config));
  try {
    check_adapter();
    FAIL() << "a wrong r passed the check";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("\"r\" is 4"), std::string::npos) << e.what();
  }
}

TEST_F(DemoFolderCheck, FailsOnUnmergedWeights) {
  write_reference_file(model_, hf_model_tensors(model_, false), folder_ / "merged/model.safetensors");
  EXPECT_THROW(check_merged(), Error);
}

}  // namespace
}  // namespace reshard::demo
