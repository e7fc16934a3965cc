#include "demo/demo_model.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "layout/checked.h"
#include "reshard/layout/error.h"

namespace reshard::demo {

using layout_detail::checked_add;
using layout_detail::checked_mul;

namespace {

constexpr const char* kStacked = "transformer.layers.stacked.";
// Bigger models are for `reshard bench`: the demo holds every rank's shards in one process.
constexpr uint64_t kMaxModelBytes = uint64_t{4} << 30;

// splitmix64's finaliser: a well-mixed 64-bit value from any input.
uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// FNV-1a: values depend on a tensor's name, not on its place in the list.
uint64_t hash_name(std::string_view name) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (const char c : name) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001B3ull;
  return h;
}

int64_t product(const std::vector<Axis>& axes) {
  int64_t n = 1;
  for (const Axis& axis : axes) n = checked_mul(n, axis.size, "demo model size");
  return n;
}

void positive(int64_t value, const char* option) {
  if (value <= 0) throw Error(ErrorCode::kParse, fmt::format("{} {}: must be positive", option, value));
}

void check_sizes(const ModelSizes& s) {
  positive(s.layers, "--layers");
  positive(s.embed, "--embed");
  positive(s.heads, "--heads");
  positive(s.kv_heads, "--kv-heads");
  positive(s.mlp, "--mlp");
  positive(s.vocab, "--vocab");
  positive(s.rank, "--rank");
  if (!(s.alpha > 0)) throw Error(ErrorCode::kParse, fmt::format("--alpha {}: must be positive", s.alpha));
  if (s.embed % s.heads != 0) {
    throw Error(ErrorCode::kParse, fmt::format("--embed {} is not a multiple of --heads {}", s.embed, s.heads));
  }
  if (s.heads % s.kv_heads != 0) {
    throw Error(ErrorCode::kParse, fmt::format("--heads {} is not a multiple of --kv-heads {}", s.heads, s.kv_heads));
  }
}

FrameworkTensor tensor_of(std::string name, DType dtype, std::vector<Axis> axes, TensorKind kind, size_t module,
                          bool stacked) {
  FrameworkTensor t;
  t.name = std::move(name);
  t.dtype = dtype;
  t.axes = std::move(axes);
  t.kind = kind;
  t.module = module;
  t.stacked = stacked;
  t.name_hash = hash_name(t.name);
  return t;
}

std::vector<Axis> joined(std::initializer_list<std::vector<Axis>> parts) {
  std::vector<Axis> axes;
  for (const auto& part : parts) axes.insert(axes.end(), part.begin(), part.end());
  return axes;
}

std::vector<Module> llama_modules(const ModelSizes& s) {
  const Axis embed{"embed", s.embed}, kv{"kv_heads", s.kv_heads}, q_per_group{"q_per_group", s.heads / s.kv_heads},
      head_dim{"head_dim", s.head_dim()}, heads{"heads", s.heads}, mlp{"mlp", s.mlp};
  return {{"self_attn.q_proj", {kv, q_per_group, head_dim}, {embed}},
          {"self_attn.k_proj", {kv, head_dim}, {embed}},
          {"self_attn.v_proj", {kv, head_dim}, {embed}},
          {"self_attn.o_proj", {embed}, {heads, head_dim}},
          {"mlp.gate_proj", {mlp}, {embed}},
          {"mlp.up_proj", {mlp}, {embed}},
          {"mlp.down_proj", {embed}, {mlp}}};
}

uint32_t f32_bits(float value) {
  uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

}  // namespace

int64_t Module::out_features() const { return product(out_axes); }
int64_t Module::in_features() const { return product(in_axes); }
std::string Module::short_name() const { return hf_path.substr(hf_path.find('.') + 1); }

Shape FrameworkTensor::shape() const {
  Shape shape;
  for (const Axis& axis : axes) shape.push_back(axis.size);
  return shape;
}

uint64_t FrameworkTensor::elements() const { return static_cast<uint64_t>(product(axes)); }

uint64_t FrameworkTensor::bytes() const { return dtype_byte_size(dtype, elements()); }

uint64_t DemoModel::bytes() const {
  uint64_t total = 0;
  for (const FrameworkTensor& t : tensors) total = checked_add(total, t.bytes(), "demo model bytes");
  return total;
}

const FrameworkTensor& DemoModel::tensor(TensorKind kind, size_t module) const {
  for (const FrameworkTensor& t : tensors) {
    if (t.kind == kind && t.module == module) return t;
  }
  throw Error(ErrorCode::kInvalidArgument, fmt::format("demo model: no tensor of kind {} for module {}",
                                                       static_cast<int>(kind), modules.at(module).hf_path));
}

float DemoModel::scaling() const { return static_cast<float>(sizes.alpha / static_cast<double>(sizes.rank)); }

std::vector<std::string> llama_module_names() {
  std::vector<std::string> names;
  for (const Module& m : llama_modules(ModelSizes{})) names.push_back(m.short_name());
  return names;
}

DemoModel make_demo_model(const ModelSizes& sizes, const std::vector<std::string>& adapted_modules) {
  check_sizes(sizes);
  DemoModel model;
  model.sizes = sizes;
  model.modules = llama_modules(sizes);
  for (const std::string& name : adapted_modules) {
    const auto it = std::find_if(model.modules.begin(), model.modules.end(),
                                 [&](const Module& m) { return m.short_name() == name; });
    if (it == model.modules.end()) {
      throw Error(ErrorCode::kParse, fmt::format("--lora-modules: '{}' is not one of {}", name,
                                                 fmt::join(llama_module_names(), ", ")));
    }
    it->adapted = true;
  }
  const Axis layer{"layer", sizes.layers}, embed{"embed", sizes.embed}, vocab{"vocab", sizes.vocab},
      r{"r", sizes.rank};
  auto& ts = model.tensors;
  ts.push_back(tensor_of("embeddings.token_embeddings.weight", DType::kBF16, {vocab, embed}, TensorKind::kPlain, 0,
                         false));
  for (size_t m = 0; m < model.modules.size(); ++m) {
    const Module& mod = model.modules[m];
    const std::string base = kStacked + mod.hf_path;
    ts.push_back(tensor_of(base + ".weight", DType::kBF16, joined({{layer}, mod.out_axes, mod.in_axes}),
                           TensorKind::kWeight, m, true));
    if (!mod.adapted) continue;
    ts.push_back(tensor_of(base + ".lora.lora_A.weight", DType::kF32, joined({{layer, r}, mod.in_axes}),
                           TensorKind::kLoraA, m, true));
    ts.push_back(tensor_of(base + ".lora.lora_B.weight", DType::kF32, joined({{layer}, mod.out_axes, {r}}),
                           TensorKind::kLoraB, m, true));
  }
  for (const char* norm : {"input_layernorm", "post_attention_layernorm"}) {
    ts.push_back(tensor_of(fmt::format("{}{}.weight", kStacked, norm), DType::kF32, {layer, embed},
                           TensorKind::kPlain, 0, true));
  }
  ts.push_back(tensor_of("transformer.norm.weight", DType::kF32, {embed}, TensorKind::kPlain, 0, false));
  ts.push_back(tensor_of("lm_head.weight", DType::kBF16, {vocab, embed}, TensorKind::kPlain, 0, false));
  if (model.bytes() > kMaxModelBytes) {
    throw Error(ErrorCode::kParse, fmt::format("the demo model would hold {} bytes; the demo's limit is {} (use "
                                               "smaller --layers, --embed, --mlp or --vocab)",
                                               model.bytes(), kMaxModelBytes));
  }
  return model;
}

uint32_t element_bits(const DemoModel& model, const FrameworkTensor& tensor, uint64_t flat) {
  const uint64_t r = mix(mix(model.sizes.seed ^ tensor.name_hash) + flat);
  const bool is_norm = tensor.kind == TensorKind::kPlain && tensor.dtype == DType::kF32;
  if (tensor.kind == TensorKind::kLoraA || tensor.kind == TensorKind::kLoraB) {
    const int k = static_cast<int>(r % 31) - 15;
    return f32_bits(static_cast<float>(k) / 128.0f);
  }
  if (is_norm) return (uint32_t{127} << 23) | static_cast<uint32_t>(r & 0x7FFFFF);
  const uint32_t sign = static_cast<uint32_t>(r >> 63);
  const uint32_t exponent = 123 + static_cast<uint32_t>((r >> 32) % 5);
  return (sign << 15) | (exponent << 7) | static_cast<uint32_t>(r & 0x7F);
}

NamedSharding framework_sharding(const FrameworkTensor& tensor, const Mesh& mesh) {
  const auto size_of = [&](std::string_view axis) { return mesh.axis_size(mesh.axis_index(axis).value()); };
  std::vector<SpecEntry> entries(tensor.axes.size());
  bool model_used = false;
  for (size_t d = 0; d < tensor.axes.size(); ++d) {
    const Axis& axis = tensor.axes[d];
    if (axis.name == "embed" && axis.size % size_of("data") == 0) {
      entries[d] = {"data"};
    } else if (!model_used && (axis.name == "vocab" || axis.name == "heads" || axis.name == "kv_heads" ||
                               axis.name == "mlp")) {
      model_used = true;
      if (axis.size % size_of("model") == 0) entries[d] = {"model"};
    }
  }
  return NamedSharding(mesh, PartitionSpec(std::move(entries)));
}

std::string hf_config_json(const DemoModel& model) {
  const ModelSizes& s = model.sizes;
  nlohmann::ordered_json config;
  config["architectures"] = {"LlamaForCausalLM"};
  config["model_type"] = "llama";
  config["hidden_size"] = s.embed;
  config["intermediate_size"] = s.mlp;
  config["num_attention_heads"] = s.heads;
  config["num_key_value_heads"] = s.kv_heads;
  config["head_dim"] = s.head_dim();
  config["num_hidden_layers"] = s.layers;
  config["vocab_size"] = s.vocab;
  config["hidden_act"] = "silu";
  config["max_position_embeddings"] = 2048;
  config["rms_norm_eps"] = 1e-05;
  config["rope_theta"] = 10000.0;
  config["tie_word_embeddings"] = false;
  config["torch_dtype"] = "bfloat16";
  return config.dump(2);
}

LoraConfig demo_lora_config(const DemoModel& model) {
  LoraConfig config;
  config.r = model.sizes.rank;
  config.lora_alpha = model.sizes.alpha;
  for (const Module& m : model.modules) {
    if (m.adapted) config.target_modules.push_back(m.short_name());
  }
  std::sort(config.target_modules.begin(), config.target_modules.end());
  config.base_model_name_or_path = "reshard-demo-llama";
  return config;
}

}  // namespace reshard::demo
