// The demo's model: a small Llama with LoRA adapters, in the framework layout
// of the `levanter-llama` preset (stacked layers, separate head axes, LoRA A
// as [layer, r, in...] and B as [layer, out..., r]), every element a pure
// function of a seed, its tensor's name and its position.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "reshard/layout/box.h"
#include "reshard/layout/dtype.h"
#include "reshard/layout/mesh.h"
#include "reshard/layout/sharding.h"
#include "reshard/pipelines/lora_config.h"

namespace reshard::demo {

// The model's dimensions (--layers, --embed, ...) and the seed of its values.
struct ModelSizes {
  int64_t layers = 2;
  int64_t embed = 128;
  int64_t heads = 8;
  int64_t kv_heads = 4;
  int64_t mlp = 256;
  int64_t vocab = 512;
  int64_t rank = 8;   // LoRA r
  double alpha = 16;  // LoRA alpha
  uint64_t seed = 0;

  int64_t head_dim() const { return embed / heads; }
};

// A named axis of a framework tensor ("kv_heads", 4): names as the preset's rearranges use them.
struct Axis {
  std::string name;
  int64_t size = 0;
};

// A linear layer of every block, as Hugging Face names it ("self_attn.q_proj"),
// with the framework's axes of its output and of its input features.
struct Module {
  std::string hf_path;
  std::vector<Axis> out_axes;
  std::vector<Axis> in_axes;
  bool adapted = false;  // has LoRA factors

  int64_t out_features() const;
  int64_t in_features() const;
  std::string short_name() const;  // "q_proj"
};

enum class TensorKind {
  kPlain,   // embeddings, head, norms: values of their own
  kWeight,  // a module's weight [layer, out..., in...]
  kLoraA,   // [layer, r, in...]
  kLoraB,   // [layer, out..., r]
};

// One tensor of the framework's checkpoint.
struct FrameworkTensor {
  std::string name;
  DType dtype = DType::kBF16;
  std::vector<Axis> axes;
  TensorKind kind = TensorKind::kPlain;
  size_t module = 0;     // index into DemoModel::modules, for all but kPlain
  bool stacked = false;  // axes[0] is the layer axis
  uint64_t name_hash = 0;

  Shape shape() const;
  uint64_t elements() const;
  uint64_t bytes() const;
};

struct DemoModel {
  ModelSizes sizes;
  std::vector<Module> modules;
  std::vector<FrameworkTensor> tensors;

  uint64_t bytes() const;
  const FrameworkTensor& tensor(TensorKind kind, size_t module) const;
  // The LoRA scaling of every adapted module: alpha / r as f32 (no patterns here).
  float scaling() const;
};

// The seven linear modules of a Llama block.
std::vector<std::string> llama_module_names();

// Checks the sizes (positive, heads a multiple of kv_heads, embed of heads,
// the model below a few GiB) and the adapted modules (names from
// llama_module_names). Error(kParse) naming the option at fault.
DemoModel make_demo_model(const ModelSizes& sizes, const std::vector<std::string>& adapted_modules);

// The bits of one element (row-major position `flat` of `tensor`): the f32
// pattern, or the bf16 one in the low 16 bits. Weights and embeddings are
// bf16 in [1/16, 2) with random signs; norms f32 in [1, 2); LoRA factors f32
// multiples of 1/128 below 1/8, so that a delta's products and sums are exact
// in f32 and the merge's only rounding is the final one to bf16, whatever the
// order of the sum.
uint32_t element_bits(const DemoModel& model, const FrameworkTensor& tensor, uint64_t flat);

// The framework layout on `mesh` (axes "data" and "model"): `embed` split
// over data, the first of vocab, heads, kv_heads, mlp over model, where they
// divide; everything else (layers, r, norms) whole.
NamedSharding framework_sharding(const FrameworkTensor& tensor, const Mesh& mesh);

// config.json of the Hugging Face model (LlamaForCausalLM, bf16) and the
// adapter's config (r, alpha, target modules).
std::string hf_config_json(const DemoModel& model);
LoraConfig demo_lora_config(const DemoModel& model);

}  // namespace reshard::demo
