// Applying maps: random maps and shapes, checked element by element against a
// reference written here from the rearrange alone, and export-then-import
// returning the original bytes.
#include "pipelines/tensor_map/tensor_map_copy.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "layout/float_convert.h"
#include "pipelines/support/axis_groups.h"
#include "pipelines/support/levanter_specs.h"
#include "pipelines/support/sub_box.h"
#include "reshard/layout/error.h"
#include "reshard/pipelines/tensor_map.h"
#include "support/seed.h"

namespace reshard {

using layout_detail::convert_floats;
using layout_detail::f32_to_bf16;
using pipelines_detail::copy_output_box;
using pipelines_detail::output_box_pieces;
using pipelines_detail::OutputPiece;
using pipelines_detail::resolve_tensor_map;
using pipelines_detail::ResolvedMap;
using pipelines_detail::ResolvedTensor;
using pipelines_detail::ResolveOptions;
using pipelines_detail::run_strided_copy;
using pipelines_detail::StridedCopy;

namespace {

using safetensors::TensorSpec;
using Bytes = std::vector<std::byte>;
using testing::groups_shape;
using testing::random_groups;
using testing::rearrange_side;
using testing::sub_box;

Shape shape_of_spec(const TensorSpec& spec) { return safetensors::layout_shape(spec); }

// One random rule: axes a0..an-1, split on the source side, permuted and
// merged on the output side, maybe one unstacked.
struct RandomRule {
  AxisSizes sizes;
  AxisGroups from, to;
  std::optional<std::string> unstack;
};

RandomRule random_rule(std::mt19937_64& rng) {
  RandomRule rule;
  const int count = 1 + static_cast<int>(rng() % 5);
  std::vector<std::string> names;
  for (int i = 0; i < count; ++i) {
    names.push_back(fmt::format("a{}", i));
    rule.sizes[names.back()] = 1 + static_cast<int64_t>(rng() % 4);
  }
  rule.from = random_groups(names, rng);
  std::vector<std::string> kept = names;
  if (rng() % 2 == 0) {
    for (const auto& group : rule.from) {
      if (group.size() == 1) {
        rule.unstack = group[0];
        kept.erase(std::find(kept.begin(), kept.end(), group[0]));
        break;
      }
    }
  }
  rule.to = random_groups(kept, rng);
  return rule;
}

int64_t volume(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

size_t width(DType dtype) { return element_bytes(dtype); }

Bytes random_bytes(size_t size, std::mt19937_64& rng) {
  Bytes bytes(size);
  for (std::byte& b : bytes) b = static_cast<std::byte>(rng() & 0xff);
  return bytes;
}

// Floats with no NaNs, so a cast reference compares bit for bit.
Bytes random_tensor(DType dtype, int64_t elements, std::mt19937_64& rng) {
  if (dtype != DType::kF32) return random_bytes(static_cast<size_t>(elements) * width(dtype), rng);
  std::vector<float> values(static_cast<size_t>(elements));
  std::uniform_real_distribution<float> dist(-1000.0f, 1000.0f);
  for (float& v : values) v = dist(rng);
  Bytes bytes(values.size() * 4);
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

// Axis values of a row-major index of a tensor whose dimensions are `groups`.
void decode(int64_t flat, const AxisGroups& groups, const std::map<std::string, int64_t>& sizes,
            std::map<std::string, int64_t>& values) {
  for (size_t g = groups.size(); g-- > 0;) {
    for (size_t k = groups[g].size(); k-- > 0;) {
      const int64_t n = sizes.at(groups[g][k]);
      values[groups[g][k]] = flat % n;
      flat /= n;
    }
  }
}

int64_t encode(const AxisGroups& groups, const std::map<std::string, int64_t>& sizes,
               const std::map<std::string, int64_t>& values) {
  int64_t flat = 0;
  for (const auto& group : groups) {
    for (const std::string& name : group) flat = flat * sizes.at(name) + values.at(name);
  }
  return flat;
}

// The reference: output element by element, from the rearrange's meaning.
Bytes reference_output(const RandomRule& rule, int64_t unstack_index, const Bytes& source, DType from, DType to) {
  const int64_t count = volume(groups_shape(rule.to, rule.sizes));
  Bytes out(static_cast<size_t>(count) * width(to));
  for (int64_t o = 0; o < count; ++o) {
    std::map<std::string, int64_t> values;
    decode(o, rule.to, rule.sizes, values);
    if (rule.unstack) values[*rule.unstack] = unstack_index;
    const auto s = static_cast<size_t>(encode(rule.from, rule.sizes, values));
    if (from == to) {
      std::memcpy(&out[static_cast<size_t>(o) * width(to)], &source[s * width(from)], width(to));
    } else {
      convert_floats(from, std::span(&source[s * width(from)], width(from)), to,
                     std::span(&out[static_cast<size_t>(o) * width(to)], width(to)), 1);
    }
  }
  return out;
}

Box random_box(const Shape& shape, std::mt19937_64& rng) {
  std::vector<int64_t> origin, extent;
  for (int64_t n : shape) {
    const int64_t a = static_cast<int64_t>(rng() % static_cast<uint64_t>(n + 1));
    const int64_t b = static_cast<int64_t>(rng() % static_cast<uint64_t>(n + 1));
    origin.push_back(std::min(a, b));
    extent.push_back(std::max(a, b) - std::min(a, b));
  }
  return Box(origin, extent);
}

Bytes produce(const ResolvedMap& map, const ResolvedTensor& tensor, const Box& box, const std::vector<Bytes>& sources) {
  Bytes out(static_cast<size_t>(box.volume()) * width(tensor.out.dtype));
  copy_output_box(map, tensor, box, [&](size_t i) { return std::span<const std::byte>(sources.at(i)); }, out);
  return out;
}

TEST(TensorMapCopy, RandomMapsMatchTheReferenceAndRoundTrip) {
  std::mt19937_64 rng = testing::seeded_rng();
  const DType kDtypes[] = {DType::kF32, DType::kBF16, DType::kF16, DType::kI32, DType::kU8, DType::kI64};
  for (int trial = 0; trial < 200; ++trial) {
    const int rule_count = 1 + static_cast<int>(rng() % 3);
    std::vector<RandomRule> rules;
    std::vector<TensorSpec> specs;
    std::vector<Bytes> sources;
    std::string json = "{\"rules\": [";
    ResolveOptions options;
    const bool cast = rng() % 3 == 0;
    if (cast) options.dtype = rng() % 2 ? DType::kBF16 : DType::kF16;
    for (int r = 0; r < rule_count; ++r) {
      rules.push_back(random_rule(rng));
      const RandomRule& rule = rules.back();
      const std::string to = rule.unstack ? fmt::format("out{}.{{{}}}", r, *rule.unstack) : fmt::format("out{}", r);
      json += fmt::format("{}{{\"from\": \"src{}\", \"to\": \"{}\", \"rearrange\": \"{} -> {}\"}}", r ? ", " : "", r,
                          to, rearrange_side(rule.from), rearrange_side(rule.to));
      for (const auto& [name, size] : rule.sizes) options.sizes[name + std::to_string(r)] = size;
      const DType dtype = cast ? DType::kF32 : kDtypes[rng() % std::size(kDtypes)];
      specs.push_back({fmt::format("src{}", r), dtype, safetensors::dims_of(groups_shape(rule.from, rule.sizes))});
      sources.push_back(random_tensor(dtype, volume(shape_of_spec(specs.back())), rng));
    }
    json += "]}";
    SCOPED_TRACE(json);
    // Sizes are per rule here (axes of different rules share names).
    TensorMap map = parse_tensor_map(json, "random");
    for (size_t r = 0; r < rules.size(); ++r) map.rules[r].sizes = rules[r].sizes;
    options.sizes.clear();
    const ResolvedMap exported = resolve_tensor_map(map, specs, options);

    std::vector<Bytes> outputs;
    for (const ResolvedTensor& tensor : exported.outputs) {
      const size_t r = tensor.rule;
      const int64_t index = rules[r].unstack ? std::stoll(tensor.out.name.substr(tensor.out.name.find('.') + 1)) : 0;
      const Bytes expected = reference_output(rules[r], index, sources[r], specs[r].dtype, tensor.out.dtype);
      outputs.push_back(produce(exported, tensor, Box::whole(shape_of_spec(tensor.out)), sources));
      ASSERT_EQ(outputs.back(), expected) << tensor.out.name;
      // Any box of it, on its own, gives the same bytes.
      const Box box = random_box(shape_of_spec(tensor.out), rng);
      ASSERT_EQ(produce(exported, tensor, box, sources),
                sub_box(expected, shape_of_spec(tensor.out), box, width(tensor.out.dtype)))
          << tensor.out.name << " box " << box.to_string();
    }
    if (cast) continue;  // a cast does not invert
    const TensorMap back = inverse_tensor_map(map);
    const ResolvedMap imported = resolve_tensor_map(back, exported.output_specs());
    ASSERT_EQ(imported.outputs.size(), specs.size());
    for (const ResolvedTensor& tensor : imported.outputs) {
      const size_t r = static_cast<size_t>(std::stoll(tensor.out.name.substr(3)));
      EXPECT_EQ(tensor.out, specs[r]);
      EXPECT_EQ(produce(imported, tensor, Box::whole(shape_of_spec(tensor.out)), outputs), sources[r]) << tensor.out.name;
    }
  }
}

// A piece read from a shard (a buffer holding only part of the source) gives
// the same bytes as from the whole source: how a sharded export uses it.
TEST(TensorMapCopy, PiecesReadFromAHeldBox) {
  std::mt19937_64 rng = testing::seeded_rng();
  const TensorMap map = parse_tensor_map(
      R"j({"rules": [{"from": "w", "to": "l.{layer}", "rearrange": "layer e h d -> e (h d)"}]})j", "m");
  const TensorSpec spec{"w", DType::kF32, {3, 5, 4, 6}};
  const Bytes source = random_tensor(spec.dtype, volume(shape_of_spec(spec)), rng);
  const ResolvedMap resolved = resolve_tensor_map(map, std::vector<TensorSpec>{spec});
  for (const ResolvedTensor& tensor : resolved.outputs) {
    const Bytes whole = produce(resolved, tensor, Box::whole(shape_of_spec(tensor.out)), {source});
    for (int trial = 0; trial < 20; ++trial) {
      const Box box = random_box(shape_of_spec(tensor.out), rng);
      Bytes out(static_cast<size_t>(box.volume()) * 4);
      for (const OutputPiece& piece : output_box_pieces(tensor, box)) {
        const Bytes held = sub_box(source, shape_of_spec(spec), piece.source_box, 4);
        run_strided_copy(piece.copy_from(piece.source_box, DType::kF32, DType::kF32), held.data(), out.data());
      }
      EXPECT_EQ(out, sub_box(whole, shape_of_spec(tensor.out), box, 4)) << box.to_string();
    }
  }
}

TEST(StridedCopy, TransposeWithCastRoundsToNearestEven) {
  // [2, 3] f32 -> its transpose in bf16.
  const std::vector<float> values = {1.0f, 1.00390625f, 1.01171875f, -2.5f, 3.0e38f, 1e-40f};
  std::vector<uint16_t> out(6);
  StridedCopy copy{{3, 2}, {1, 3}, {2, 1}, 0, 0, DType::kF32, DType::kBF16};
  run_strided_copy(copy, reinterpret_cast<const std::byte*>(values.data()), reinterpret_cast<std::byte*>(out.data()));
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 2; ++j) {
      EXPECT_EQ(out[static_cast<size_t>(i * 2 + j)], f32_to_bf16(values[static_cast<size_t>(j * 3 + i)]));
    }
  }
  EXPECT_EQ(out[0], 0x3f80);  // 1.0
  EXPECT_EQ(out[2], 0x3f80);  // 1.00390625 is a tie: to even
}

TEST(StridedCopy, RefusesCastsItCannotDo) {
  std::byte buffer[8] = {};
  StridedCopy copy{{1}, {1}, {1}, 0, 0, DType::kI32, DType::kF32};
  EXPECT_THROW(run_strided_copy(copy, buffer, buffer), Error);
}

}  // namespace
}  // namespace reshard

namespace reshard {
namespace {

// Larger than a tile on both axes, with ragged edges, in every dtype width.
TEST(StridedCopy, TiledTransposeMatchesElementByElement) {
  std::mt19937_64 rng = testing::seeded_rng();
  const int64_t rows = 70, cols = 45;
  for (const DType dtype : {DType::kU8, DType::kBF16, DType::kF32, DType::kI64}) {
    const size_t w = width(dtype);
    const Bytes src = random_bytes(static_cast<size_t>(rows * cols) * w, rng);
    Bytes dst(src.size());
    run_strided_copy({{cols, rows}, {1, cols}, {rows, 1}, 0, 0, dtype, dtype}, src.data(), dst.data());
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j) {
        ASSERT_EQ(std::memcmp(&dst[static_cast<size_t>(j * rows + i) * w], &src[static_cast<size_t>(i * cols + j) * w], w), 0);
      }
    }
  }
}

}  // namespace
}  // namespace reshard

namespace reshard {
namespace {

// The preset on a small Llama: every tensor's bytes come back on import, and
// q_proj's rows are the (kv_heads, q_per_group, head_dim) axes merged in order.
TEST(TensorMapCopy, LevanterPresetRoundTripsAndMergesHeadsInOrder) {
  std::mt19937_64 rng = testing::seeded_rng();
  const int64_t L = 2, E = 6, KV = 2, G = 3, D = 2, M = 5, V = 7, R = 2;
  // G != KV, so merging the heads in the wrong order shows.
  const std::vector<TensorSpec> specs = testing::levanter_specs(
      {.layers = L, .kv_heads = KV, .q_per_group = G, .head_dim = D, .embed = E, .mlp = M, .vocab = V, .r = R});
  std::vector<Bytes> sources;
  for (const TensorSpec& spec : specs) sources.push_back(random_tensor(spec.dtype, volume(shape_of_spec(spec)), rng));
  const TensorMap map = *tensor_map_preset("levanter-llama");
  const ResolvedMap exported = resolve_tensor_map(map, specs);
  std::vector<Bytes> outputs;
  for (const ResolvedTensor& tensor : exported.outputs) {
    outputs.push_back(produce(exported, tensor, Box::whole(shape_of_spec(tensor.out)), sources));
  }
  // model.layers.1.self_attn.q_proj.weight[(kv * G + g) * D + d, e] == q[1, kv, g, d, e].
  const ResolvedTensor* q1 = exported.find("model.layers.1.self_attn.q_proj.weight");
  ASSERT_NE(q1, nullptr);
  const Bytes& q_out = outputs[static_cast<size_t>(q1 - exported.outputs.data())];
  for (int64_t kv = 0; kv < KV; ++kv) {
    for (int64_t g = 0; g < G; ++g) {
      for (int64_t d = 0; d < D; ++d) {
        for (int64_t e = 0; e < E; ++e) {
          const int64_t row = (kv * G + g) * D + d;
          const int64_t src = (((1 * KV + kv) * G + g) * D + d) * E + e;
          ASSERT_EQ(std::memcmp(&q_out[static_cast<size_t>(row * E + e) * 4], &sources[1][static_cast<size_t>(src) * 4], 4), 0);
        }
      }
    }
  }
  ResolveOptions options;
  options.sizes = llama_axis_sizes_from_config(
      fmt::format(R"({{"hidden_size": {}, "num_attention_heads": {}, "num_key_value_heads": {}, "head_dim": {}}})", E,
                  KV * G, KV, D),
      "config.json");
  const ResolvedMap imported = resolve_tensor_map(inverse_tensor_map(map), exported.output_specs(), options);
  ASSERT_EQ(imported.outputs.size(), specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    const ResolvedTensor* tensor = imported.find(specs[i].name);
    ASSERT_NE(tensor, nullptr) << specs[i].name;
    EXPECT_EQ(produce(imported, *tensor, Box::whole(shape_of_spec(tensor->out)), outputs), sources[i]) << specs[i].name;
  }
}

}  // namespace
}  // namespace reshard
