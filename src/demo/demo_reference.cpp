#include "demo/demo_reference.h"

#include <cstring>

#include <fmt/format.h>

namespace reshard::demo {
namespace {

float f32_of(uint32_t bits) {
  float value = 0;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// A framework element as f32 (bf16 widens exactly).
float value_of(const DemoModel& model, const FrameworkTensor& tensor, uint64_t flat) {
  const uint32_t bits = element_bits(model, tensor, flat);
  return f32_of(tensor.dtype == DType::kBF16 ? bits << 16 : bits);
}

// Element (o, i) of layer `layer`'s weight of module `m`, merged: the delta
// summed over k = 0..r-1 in f32, times scaling, plus W, rounded once.
uint16_t merged_weight_bits(const DemoModel& model, size_t m, uint64_t layer, uint64_t o, uint64_t i) {
  const Module& mod = model.modules[m];
  const auto out = static_cast<uint64_t>(mod.out_features());
  const auto in = static_cast<uint64_t>(mod.in_features());
  const auto r = static_cast<uint64_t>(model.sizes.rank);
  const FrameworkTensor& w = model.tensor(TensorKind::kWeight, m);
  const FrameworkTensor& a = model.tensor(TensorKind::kLoraA, m);
  const FrameworkTensor& b = model.tensor(TensorKind::kLoraB, m);
  // [layer, out..., in...], [layer, r, in...] and [layer, out..., r], row-major.
  float sum = 0;
  for (uint64_t k = 0; k < r; ++k) {
    sum += value_of(model, b, (layer * out + o) * r + k) * value_of(model, a, (layer * r + k) * in + i);
  }
  const float weight = value_of(model, w, (layer * out + o) * in + i);
  return round_to_bf16(weight + sum * model.scaling());
}

std::string module_name(const Module& m, int64_t layer) { return fmt::format("model.layers.{}.{}", layer, m.hf_path); }

// The HF name of a plain (not a module's) framework tensor, per layer when stacked.
std::string plain_name(const FrameworkTensor& t, int64_t layer) {
  if (t.name == "embeddings.token_embeddings.weight") return "model.embed_tokens.weight";
  if (t.name == "transformer.norm.weight") return "model.norm.weight";
  if (t.name == "lm_head.weight") return t.name;
  const std::string stacked = "transformer.layers.stacked.";
  return fmt::format("model.layers.{}.{}", layer, t.name.substr(stacked.size()));
}

// The framework tensor's shape without its layer axis.
Shape per_layer_shape(const FrameworkTensor& t) {
  Shape shape = t.shape();
  if (t.stacked) shape.erase(shape.begin());
  return shape;
}

// Which element of the source a Hugging Face element is: the preset only
// unstacks and merges adjacent axes, so the row-major position within the
// layer's slice is the same.
uint64_t source_flat(const HfTensor& t, uint64_t flat) {
  if (!t.layer) return flat;
  return static_cast<uint64_t>(*t.layer) * t.elements() + flat;
}

}  // namespace

uint64_t HfTensor::elements() const {
  uint64_t n = 1;
  for (const int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

std::vector<HfTensor> hf_model_tensors(const DemoModel& model, bool merged) {
  std::vector<HfTensor> out;
  for (size_t s = 0; s < model.tensors.size(); ++s) {
    const FrameworkTensor& t = model.tensors[s];
    if (t.kind == TensorKind::kLoraA || t.kind == TensorKind::kLoraB) continue;
    const int64_t layers = t.stacked ? model.sizes.layers : 1;
    for (int64_t l = 0; l < layers; ++l) {
      HfTensor hf;
      hf.dtype = t.dtype;
      hf.source = s;
      if (t.stacked) hf.layer = l;
      if (t.kind == TensorKind::kWeight) {
        const Module& m = model.modules[t.module];
        hf.name = module_name(m, l) + ".weight";
        hf.shape = {m.out_features(), m.in_features()};
        hf.merged = merged && m.adapted;
      } else {
        hf.name = plain_name(t, l);
        hf.shape = per_layer_shape(t);
      }
      out.push_back(std::move(hf));
    }
  }
  return out;
}

std::vector<HfTensor> hf_adapter_tensors(const DemoModel& model) {
  std::vector<HfTensor> out;
  for (size_t s = 0; s < model.tensors.size(); ++s) {
    const FrameworkTensor& t = model.tensors[s];
    if (t.kind != TensorKind::kLoraA && t.kind != TensorKind::kLoraB) continue;
    const Module& m = model.modules[t.module];
    const bool is_a = t.kind == TensorKind::kLoraA;
    for (int64_t l = 0; l < model.sizes.layers; ++l) {
      HfTensor hf;
      hf.name = fmt::format("base_model.model.{}.lora_{}.weight", module_name(m, l), is_a ? "A" : "B");
      hf.dtype = t.dtype;
      hf.shape = is_a ? Shape{model.sizes.rank, m.in_features()} : Shape{m.out_features(), model.sizes.rank};
      hf.source = s;
      hf.layer = l;
      out.push_back(std::move(hf));
    }
  }
  return out;
}

uint32_t hf_element_bits(const DemoModel& model, const HfTensor& tensor, uint64_t flat) {
  const FrameworkTensor& source = model.tensors[tensor.source];
  if (!tensor.merged) return element_bits(model, source, source_flat(tensor, flat));
  const auto in = static_cast<uint64_t>(tensor.shape[1]);
  return merged_weight_bits(model, source.module, static_cast<uint64_t>(*tensor.layer), flat / in, flat % in);
}

uint32_t merged_framework_bits(const DemoModel& model, const FrameworkTensor& tensor, uint64_t flat) {
  if (tensor.kind != TensorKind::kWeight || !model.modules[tensor.module].adapted) {
    return element_bits(model, tensor, flat);
  }
  const Module& m = model.modules[tensor.module];
  const auto out = static_cast<uint64_t>(m.out_features());
  const auto in = static_cast<uint64_t>(m.in_features());
  return merged_weight_bits(model, tensor.module, flat / (out * in), (flat / in) % out, flat % in);
}

uint16_t round_to_bf16(float value) {
  uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);  // NaN: keep it quiet
  const uint32_t lsb = (bits >> 16) & 1;
  return static_cast<uint16_t>((bits + 0x7FFFu + lsb) >> 16);
}

}  // namespace reshard::demo
