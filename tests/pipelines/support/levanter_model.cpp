#include "pipelines/support/levanter_model.h"

#include <cstring>

#include <fmt/format.h>

#include "layout/float_convert.h"
#include "reshard/layout/mesh.h"
#include "reshard/layout/partition_spec.h"
#include "reshard/layout/topology.h"

namespace reshard::testing {

using layout_detail::bf16_to_f32;
using layout_detail::f32_to_bf16;

namespace {

constexpr const char* kStack = "transformer.layers.stacked.";

int64_t volume_of(const Shape& shape) {
  int64_t n = 1;
  for (const int64_t d : shape) n *= d;
  return n;
}

// Row-major offset of `index` in `shape`.
size_t at(const Shape& shape, std::initializer_list<int64_t> index) {
  int64_t offset = 0;
  size_t d = 0;
  for (const int64_t i : index) offset = offset * shape[d++] + i;
  return static_cast<size_t>(offset);
}

FrameworkTensor random_tensor(std::string name, DType dtype, Shape shape, std::mt19937_64& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  FrameworkTensor t{std::move(name), dtype, std::move(shape), {}};
  for (int64_t n = 0; n < volume_of(t.shape); ++n) {
    float v = dist(rng);
    if (dtype == DType::kBF16) v = bf16_to_f32(f32_to_bf16(v));
    t.values.push_back(v);
  }
  return t;
}

const FrameworkTensor& find(const std::vector<FrameworkTensor>& model, const std::string& name) {
  for (const FrameworkTensor& t : model) {
    if (t.name == name) return t;
  }
  throw std::runtime_error("no framework tensor " + name);
}

}  // namespace

std::vector<std::byte> encode(const std::vector<float>& values, DType dtype) {
  std::vector<std::byte> out(values.size() * (dtype == DType::kF32 ? 4 : 2));
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::kF32) {
      std::memcpy(&out[i * 4], &values[i], 4);
    } else {
      const uint16_t bits = f32_to_bf16(values[i]);
      std::memcpy(&out[i * 2], &bits, 2);
    }
  }
  return out;
}

std::vector<std::byte> FrameworkTensor::bytes() const { return encode(values, dtype); }

std::vector<FrameworkTensor> levanter_model(const LevanterDims& d, DType base, std::mt19937_64& rng) {
  const std::string s = kStack;
  const int64_t L = d.layers, KV = d.kv_heads, G = d.q_per_group, D = d.head_dim, E = d.embed, M = d.mlp;
  std::vector<FrameworkTensor> model;
  const auto add = [&](const std::string& name, DType dtype, Shape shape) {
    model.push_back(random_tensor(name, dtype, std::move(shape), rng));
  };
  add("embeddings.token_embeddings.weight", base, {d.vocab, E});
  add(s + "self_attn.q_proj.weight", base, {L, KV, G, D, E});
  add(s + "self_attn.k_proj.weight", base, {L, KV, D, E});
  add(s + "self_attn.v_proj.weight", base, {L, KV, D, E});
  add(s + "self_attn.o_proj.weight", base, {L, E, KV * G, D});
  add(s + "mlp.gate_proj.weight", base, {L, M, E});
  add(s + "mlp.up_proj.weight", base, {L, M, E});
  add(s + "mlp.down_proj.weight", base, {L, E, M});
  add(s + "input_layernorm.weight", base, {L, E});
  add(s + "post_attention_layernorm.weight", base, {L, E});
  add("transformer.norm.weight", base, {E});
  add("lm_head.weight", base, {d.vocab, E});
  add(s + "self_attn.q_proj.lora.lora_A.weight", DType::kF32, {L, d.r, E});
  add(s + "self_attn.q_proj.lora.lora_B.weight", DType::kF32, {L, KV, G, D, d.r});
  add(s + "self_attn.v_proj.lora.lora_A.weight", DType::kF32, {L, d.r, E});
  add(s + "self_attn.v_proj.lora.lora_B.weight", DType::kF32, {L, KV, D, d.r});
  add(s + "self_attn.o_proj.lora.lora_A.weight", DType::kF32, {L, d.r, KV * G, D});
  add(s + "self_attn.o_proj.lora.lora_B.weight", DType::kF32, {L, E, d.r});
  add(s + "mlp.down_proj.lora.lora_A.weight", DType::kF32, {L, d.r, M});
  add(s + "mlp.down_proj.lora.lora_B.weight", DType::kF32, {L, E, d.r});
  return model;
}

std::vector<NamedArray> levanter_arrays(const std::vector<FrameworkTensor>& model, int process) {
  const Mesh mesh({{"data", 2}, {"model", 2}}, {0, 2, 1, 3});
  const Topology topology = Topology::uniform(4, 2);
  std::vector<NamedArray> arrays;
  for (const FrameworkTensor& t : model) {
    std::vector<SpecEntry> entries;
    for (size_t dim = 0; dim < t.shape.size() && t.shape.size() > 1 && dim < 2; ++dim) {
      entries.push_back(t.shape[dim] % 2 == 0 ? SpecEntry{dim == 0 ? "data" : "model"} : SpecEntry{});
    }
    const std::vector<std::byte> bytes = t.bytes();
    const size_t width = t.dtype == DType::kF32 ? 4 : 2;
    const ElementFunction element = [&](std::span<const int64_t> index, std::span<std::byte> out) {
      int64_t offset = 0;
      for (size_t dim = 0; dim < index.size(); ++dim) offset = offset * t.shape[dim] + index[dim];
      std::memcpy(out.data(), &bytes[static_cast<size_t>(offset) * width], width);
    };
    arrays.push_back({t.name, ShardedArray::from_function(t.shape, t.dtype, NamedSharding(mesh, PartitionSpec(entries)),
                                                          topology, process, element)});
  }
  return arrays;
}

std::map<std::string, HfTensor> levanter_reference(const std::vector<FrameworkTensor>& model, const LevanterDims& d) {
  const std::string s = kStack;
  const int64_t KV = d.kv_heads, G = d.q_per_group, D = d.head_dim, E = d.embed, M = d.mlp, R = d.r, H = KV * G;
  std::map<std::string, HfTensor> out;
  const auto make = [&](const std::string& name, Shape shape) -> std::vector<float>& {
    HfTensor& t = out[name];
    t.shape = std::move(shape);
    t.values.assign(static_cast<size_t>(volume_of(t.shape)), 0.0f);
    return t.values;
  };
  const auto copy_whole = [&](const std::string& from, const std::string& to) {
    const FrameworkTensor& src = find(model, from);
    make(to, src.shape) = src.values;
  };
  copy_whole("embeddings.token_embeddings.weight", "model.embed_tokens.weight");
  copy_whole("transformer.norm.weight", "model.norm.weight");
  copy_whole("lm_head.weight", "lm_head.weight");
  for (int64_t l = 0; l < d.layers; ++l) {
    const std::string hf = fmt::format("model.layers.{}.", l);
    const std::string peft = "base_model.model." + hf;
    {  // q: [(kv g d), e] from [l, kv, g, d, e]; its B: [(kv g d), r] from [l, kv, g, d, r]
      const FrameworkTensor& q = find(model, s + "self_attn.q_proj.weight");
      const FrameworkTensor& qb = find(model, s + "self_attn.q_proj.lora.lora_B.weight");
      std::vector<float>& w = make(hf + "self_attn.q_proj.weight", {H * D, E});
      std::vector<float>& b = make(peft + "self_attn.q_proj.lora_B.weight", {H * D, R});
      for (int64_t kv = 0; kv < KV; ++kv)
        for (int64_t g = 0; g < G; ++g)
          for (int64_t dd = 0; dd < D; ++dd) {
            const int64_t row = (kv * G + g) * D + dd;
            for (int64_t e = 0; e < E; ++e) w[at({H * D, E}, {row, e})] = q.values[at(q.shape, {l, kv, g, dd, e})];
            for (int64_t r = 0; r < R; ++r) b[at({H * D, R}, {row, r})] = qb.values[at(qb.shape, {l, kv, g, dd, r})];
          }
    }
    for (const char* kv_name : {"k_proj", "v_proj"}) {  // [(kv d), e] from [l, kv, d, e]
      const FrameworkTensor& src = find(model, s + "self_attn." + kv_name + ".weight");
      std::vector<float>& w = make(hf + "self_attn." + kv_name + ".weight", {KV * D, E});
      for (int64_t kv = 0; kv < KV; ++kv)
        for (int64_t dd = 0; dd < D; ++dd)
          for (int64_t e = 0; e < E; ++e) w[at({KV * D, E}, {kv * D + dd, e})] = src.values[at(src.shape, {l, kv, dd, e})];
    }
    {  // v's B: [(kv d), r] from [l, kv, d, r]
      const FrameworkTensor& src = find(model, s + "self_attn.v_proj.lora.lora_B.weight");
      std::vector<float>& b = make(peft + "self_attn.v_proj.lora_B.weight", {KV * D, R});
      for (int64_t kv = 0; kv < KV; ++kv)
        for (int64_t dd = 0; dd < D; ++dd)
          for (int64_t r = 0; r < R; ++r) b[at({KV * D, R}, {kv * D + dd, r})] = src.values[at(src.shape, {l, kv, dd, r})];
    }
    {  // o: [e, (h d)] from [l, e, h, d]; its A: [r, (h d)] from [l, r, h, d]
      const FrameworkTensor& o = find(model, s + "self_attn.o_proj.weight");
      const FrameworkTensor& oa = find(model, s + "self_attn.o_proj.lora.lora_A.weight");
      std::vector<float>& w = make(hf + "self_attn.o_proj.weight", {E, H * D});
      std::vector<float>& a = make(peft + "self_attn.o_proj.lora_A.weight", {R, H * D});
      for (int64_t h = 0; h < H; ++h)
        for (int64_t dd = 0; dd < D; ++dd) {
          for (int64_t e = 0; e < E; ++e) w[at({E, H * D}, {e, h * D + dd})] = o.values[at(o.shape, {l, e, h, dd})];
          for (int64_t r = 0; r < R; ++r) a[at({R, H * D}, {r, h * D + dd})] = oa.values[at(oa.shape, {l, r, h, dd})];
        }
    }
    // The rest drop the layer axis and keep their axes: [a, b] from [l, a, b].
    const auto unstack_2d = [&](const std::string& from, const std::string& to) {
      const FrameworkTensor& src = find(model, from);
      const int64_t rows = src.shape[1], cols = src.shape.size() > 2 ? src.shape[2] : 1;
      std::vector<float>& w = make(to, src.shape.size() > 2 ? Shape{rows, cols} : Shape{rows});
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j)
          w[static_cast<size_t>(i * cols + j)] =
              src.shape.size() > 2 ? src.values[at(src.shape, {l, i, j})] : src.values[at(src.shape, {l, i})];
    };
    unstack_2d(s + "mlp.gate_proj.weight", hf + "mlp.gate_proj.weight");
    unstack_2d(s + "mlp.up_proj.weight", hf + "mlp.up_proj.weight");
    unstack_2d(s + "mlp.down_proj.weight", hf + "mlp.down_proj.weight");
    unstack_2d(s + "input_layernorm.weight", hf + "input_layernorm.weight");
    unstack_2d(s + "post_attention_layernorm.weight", hf + "post_attention_layernorm.weight");
    unstack_2d(s + "self_attn.q_proj.lora.lora_A.weight", peft + "self_attn.q_proj.lora_A.weight");
    unstack_2d(s + "self_attn.v_proj.lora.lora_A.weight", peft + "self_attn.v_proj.lora_A.weight");
    unstack_2d(s + "self_attn.o_proj.lora.lora_B.weight", peft + "self_attn.o_proj.lora_B.weight");
    unstack_2d(s + "mlp.down_proj.lora.lora_A.weight", peft + "mlp.down_proj.lora_A.weight");
    unstack_2d(s + "mlp.down_proj.lora.lora_B.weight", peft + "mlp.down_proj.lora_B.weight");
  }
  (void)M;
  return out;
}

}  // namespace reshard::testing
