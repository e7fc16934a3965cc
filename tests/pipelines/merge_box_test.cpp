// LoRA merge against a plain dense computation written here: f32 and bf16
// bases, rsLoRA, rank/alpha patterns, fan_in_fan_out, and boxes of W.
#include "pipelines/lora/merge_box.h"

#include <cmath>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "layout/float_convert.h"
#include "layout/support/expect_error.h"
#include "reshard/layout/error.h"
#include "reshard/pipelines/lora_config.h"
#include "support/seed.h"

namespace reshard {

using layout_detail::bf16_to_f32;
using layout_detail::convert_floats;
using layout_detail::f32_to_bf16;
using pipelines_detail::check_lora_shapes;
using pipelines_detail::FactorReader;
using pipelines_detail::LoraDelta;
using pipelines_detail::LoraFactor;
using pipelines_detail::merge_lora_box;
using pipelines_detail::merge_lora_box_over_threads;

namespace {

using Bytes = std::vector<std::byte>;

// A matrix of values exactly representable in `dtype`, kept as f32 and as bytes.
struct Matrix {
  int64_t rows = 0, cols = 0;
  DType dtype = DType::kF32;
  std::vector<float> values;
  Bytes bytes;

  float at(int64_t i, int64_t j) const { return values[static_cast<size_t>(i * cols + j)]; }
};

Matrix random_matrix(int64_t rows, int64_t cols, DType dtype, float scale, std::mt19937_64& rng) {
  Matrix m{rows, cols, dtype, {}, {}};
  std::normal_distribution<float> dist(0.0f, scale);
  for (int64_t n = 0; n < rows * cols; ++n) {
    float v = dist(rng);
    uint16_t bits = 0;
    if (dtype == DType::kBF16) {
      bits = f32_to_bf16(v);
      v = bf16_to_f32(bits);
    }
    m.values.push_back(v);
    const size_t at = m.bytes.size();
    m.bytes.resize(at + (dtype == DType::kF32 ? 4 : 2));
    if (dtype == DType::kF32) {
      std::memcpy(&m.bytes[at], &v, 4);
    } else {
      std::memcpy(&m.bytes[at], &bits, 2);
    }
  }
  return m;
}

LoraFactor factor_of(const Matrix& m) { return LoraFactor::in_memory(m.dtype, {m.rows, m.cols}, m.bytes); }

// The dense reference: W + (B @ A) * scaling (or its transpose), each sum in k
// order, in f32, rounded to W's dtype; as W's dtype's bits.
Bytes dense_merge(const Matrix& w, const Matrix& a, const Matrix& b, float scaling, bool fan_in_fan_out) {
  Bytes out;
  for (int64_t i = 0; i < w.rows; ++i) {
    for (int64_t j = 0; j < w.cols; ++j) {
      float sum = 0;
      for (int64_t k = 0; k < a.rows; ++k) sum += fan_in_fan_out ? b.at(j, k) * a.at(k, i) : b.at(i, k) * a.at(k, j);
      const float merged = w.at(i, j) + sum * scaling;
      const size_t at = out.size();
      if (w.dtype == DType::kF32) {
        out.resize(at + 4);
        std::memcpy(&out[at], &merged, 4);
      } else {
        const uint16_t bits = f32_to_bf16(merged);
        out.resize(at + 2);
        std::memcpy(&out[at], &bits, 2);
      }
    }
  }
  return out;
}

Bytes box_of(const Bytes& whole, int64_t cols, const Box& box, size_t width) {
  Bytes out;
  for (int64_t i = box.origin()[0]; i < box.origin()[0] + box.shape()[0]; ++i) {
    const auto begin = static_cast<size_t>(i * cols + box.origin()[1]) * width;
    out.insert(out.end(), whole.begin() + static_cast<std::ptrdiff_t>(begin),
               whole.begin() + static_cast<std::ptrdiff_t>(begin + static_cast<size_t>(box.shape()[1]) * width));
  }
  return out;
}

Box random_box(int64_t rows, int64_t cols, std::mt19937_64& rng) {
  const int64_t r0 = static_cast<int64_t>(rng() % static_cast<uint64_t>(rows));
  const int64_t c0 = static_cast<int64_t>(rng() % static_cast<uint64_t>(cols));
  return Box({r0, c0}, {1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(rows - r0)),
                        1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(cols - c0))});
}

struct Case {
  DType w_dtype;
  DType factor_dtype;
  bool fan_in_fan_out;
  bool rslora;
};

class LoraMergeTest : public ::testing::TestWithParam<Case> {};

TEST_P(LoraMergeTest, WholeWeightAndBoxesEqualTheDenseComputation) {
  const Case c = GetParam();
  std::mt19937_64 rng = testing::seeded_rng();
  for (int trial = 0; trial < 10; ++trial) {
    // Every other trial is wide enough for the kernels' 64-column tiles and a tail past them.
    const uint64_t most = trial % 2 == 0 ? 40 : 160;
    const int64_t out = 1 + static_cast<int64_t>(rng() % most), in = 1 + static_cast<int64_t>(rng() % most);
    const int64_t r = 1 + static_cast<int64_t>(rng() % 9);
    const Matrix w = c.fan_in_fan_out ? random_matrix(in, out, c.w_dtype, 1.0f, rng)
                                      : random_matrix(out, in, c.w_dtype, 1.0f, rng);
    const Matrix a = random_matrix(r, in, c.factor_dtype, 0.5f, rng);
    const Matrix b = random_matrix(out, r, c.factor_dtype, 0.5f, rng);
    LoraConfig config;
    config.r = r;
    config.lora_alpha = static_cast<double>(1 + rng() % 32);
    config.use_rslora = c.rslora;
    const float scaling = static_cast<float>(c.rslora ? config.lora_alpha / std::sqrt(static_cast<double>(r))
                                                      : config.lora_alpha / static_cast<double>(r));
    ASSERT_EQ(module_lora(config, "model.layers.0.self_attn.q_proj").scaling, scaling);
    const LoraDelta delta{factor_of(a), factor_of(b), scaling, c.fan_in_fan_out};
    check_lora_shapes(delta, {w.rows, w.cols}, w.dtype, "q_proj");
    const Bytes expected = dense_merge(w, a, b, scaling, c.fan_in_fan_out);

    Bytes merged(w.bytes.size());
    merge_lora_box(delta, Box::whole({w.rows, w.cols}), w.dtype, w.bytes, w.dtype, merged);
    ASSERT_EQ(merged, expected);

    const size_t width = w.dtype == DType::kF32 ? 4 : 2;
    for (int b_trial = 0; b_trial < 5; ++b_trial) {
      const Box box = random_box(w.rows, w.cols, rng);
      Bytes in_place = box_of(w.bytes, w.cols, box, width);
      merge_lora_box(delta, box, w.dtype, in_place, w.dtype, in_place);
      ASSERT_EQ(in_place, box_of(expected, w.cols, box, width)) << box.to_string();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Bases, LoraMergeTest,
                         ::testing::Values(Case{DType::kF32, DType::kF32, false, false},
                                           Case{DType::kBF16, DType::kBF16, false, false},
                                           Case{DType::kBF16, DType::kF32, false, true},
                                           Case{DType::kF32, DType::kBF16, true, false},
                                           Case{DType::kBF16, DType::kBF16, true, true}),
                         [](const auto& param_info) {
                           const Case& c = param_info.param;
                           return std::string(dtype_name(c.w_dtype)) + "_factors_" +
                                  std::string(dtype_name(c.factor_dtype)) + (c.fan_in_fan_out ? "_fan_in_fan_out" : "") +
                                  (c.rslora ? "_rslora" : "");
                         });

// A shard fetches only B's rows and A's columns that its box needs.
TEST(LoraMerge, ReadsOnlyTheFactorRowsAndColumnsOfTheBox) {
  std::mt19937_64 rng = testing::seeded_rng();
  const Matrix w = random_matrix(12, 10, DType::kF32, 1, rng);
  const Matrix a = random_matrix(4, 10, DType::kF32, 1, rng), b = random_matrix(12, 4, DType::kF32, 1, rng);
  std::vector<Box> a_reads, b_reads;
  LoraDelta delta{factor_of(a), factor_of(b), 2.0f, false};
  const FactorReader read_a = delta.a.read, read_b = delta.b.read;
  delta.a.read = [&](const Box& box, std::span<std::byte> out) { a_reads.push_back(box); read_a(box, out); };
  delta.b.read = [&](const Box& box, std::span<std::byte> out) { b_reads.push_back(box); read_b(box, out); };
  const Box box({4, 6}, {4, 3});
  Bytes part = box_of(w.bytes, 10, box, 4), out(part.size());
  merge_lora_box(delta, box, DType::kF32, part, DType::kF32, out);
  EXPECT_EQ(a_reads, std::vector<Box>{Box({0, 6}, {4, 3})});
  EXPECT_EQ(b_reads, std::vector<Box>{Box({4, 0}, {4, 4})});
  EXPECT_EQ(out, box_of(dense_merge(w, a, b, 2.0f, false), 10, box, 4));
}

// Split over threads: the bytes of one call, for boxes at any origin and with
// fan_in_fan_out; the factors read once, on the caller's thread, only the
// parts the box needs.
TEST(LoraMerge, OverThreadsWritesTheBytesOfOneCallAndReadsTheFactorsOnce) {
  std::mt19937_64 rng = testing::seeded_rng();
  for (const bool fan_in_fan_out : {false, true}) {
    // A box 1400 f32 columns wide: 5.5 KiB a row, so 1 MiB a thread is 188 rows: 3 threads of 650.
    const int64_t rows = 700, cols = 1536, r = 4;
    const Matrix w = random_matrix(rows, cols, DType::kF32, 1, rng);
    // A is [r, in] and B [out, r]; with fan_in_fan_out W is [in, out].
    const int64_t in = fan_in_fan_out ? rows : cols, out_features = fan_in_fan_out ? cols : rows;
    const Matrix a = random_matrix(r, in, DType::kF32, 1, rng), b = random_matrix(out_features, r, DType::kF32, 1, rng);
    LoraDelta delta{factor_of(a), factor_of(b), 2.0f, fan_in_fan_out};
    const FactorReader read_a = delta.a.read, read_b = delta.b.read;
    std::vector<Box> reads;
    bool other_thread = false;
    const auto caller = std::this_thread::get_id();
    const auto counted = [&](const FactorReader& read) {
      return [&, read](const Box& box, std::span<std::byte> out) {
        if (std::this_thread::get_id() != caller) other_thread = true;
        reads.push_back(box);
        read(box, out);
      };
    };
    delta.a.read = counted(read_a);
    delta.b.read = counted(read_b);
    const Box box({37, 100}, {650, 1400});
    const Bytes part = box_of(w.bytes, cols, box, 4);
    Bytes one(part.size() / 2), split(part.size() / 2);  // bf16 out of f32
    merge_lora_box(LoraDelta{factor_of(a), factor_of(b), 2.0f, fan_in_fan_out}, box, DType::kF32, part, DType::kBF16,
                   one);
    merge_lora_box_over_threads(delta, box, DType::kF32, part, DType::kBF16, split, 4);
    EXPECT_EQ(split, one) << (fan_in_fan_out ? "fan_in_fan_out" : "");
    EXPECT_FALSE(other_thread);
    EXPECT_EQ(reads.size(), 2u);  // A's part and B's part, once each
    EXPECT_THROW(merge_lora_box_over_threads(delta, box, DType::kF32, std::span(part).first(8), DType::kBF16, split, 4),
                 Error);
  }
}

// rank_pattern and alpha_pattern change a module's scaling, which the merge uses.
TEST(LoraMerge, PatternsGiveEachModuleItsScaling) {
  std::mt19937_64 rng = testing::seeded_rng();
  LoraConfig config;
  config.r = 8;
  config.lora_alpha = 16;
  config.rank_pattern = {{"v_proj", 2}};
  config.alpha_pattern = {{"layers\\.1\\.self_attn\\.v_proj", 6}};
  const ModuleLora v0 = module_lora(config, "model.layers.0.self_attn.v_proj");
  const ModuleLora v1 = module_lora(config, "model.layers.1.self_attn.v_proj");
  EXPECT_EQ(v0.scaling, 8.0f);  // 16 / 2
  EXPECT_EQ(v1.scaling, 3.0f);  // 6 / 2
  const Matrix w = random_matrix(6, 5, DType::kBF16, 1, rng);
  const Matrix a = random_matrix(2, 5, DType::kF32, 1, rng), b = random_matrix(6, 2, DType::kF32, 1, rng);
  Bytes merged(w.bytes.size());
  merge_lora_box({factor_of(a), factor_of(b), v1.scaling, false}, Box::whole({6, 5}), w.dtype, w.bytes, w.dtype,
                 merged);
  EXPECT_EQ(merged, dense_merge(w, a, b, 3.0f, false));
}

TEST(LoraMerge, OutputInAnotherDtypeIsTheRoundedValueWidened) {
  std::mt19937_64 rng = testing::seeded_rng();
  const Matrix w = random_matrix(3, 4, DType::kBF16, 1, rng);
  const Matrix a = random_matrix(2, 4, DType::kF32, 1, rng), b = random_matrix(3, 2, DType::kF32, 1, rng);
  const LoraDelta delta{factor_of(a), factor_of(b), 0.5f, false};
  Bytes as_bf16(w.bytes.size()), as_f32(w.bytes.size() * 2), widened(as_f32.size());
  merge_lora_box(delta, Box::whole({3, 4}), DType::kBF16, w.bytes, DType::kBF16, as_bf16);
  merge_lora_box(delta, Box::whole({3, 4}), DType::kBF16, w.bytes, DType::kF32, as_f32);
  convert_floats(DType::kBF16, as_bf16, DType::kF32, widened, 12);
  EXPECT_EQ(as_f32, widened);
}

TEST(LoraMerge, ShapesThatDoNotFitNameTheModule) {
  const Matrix a{2, 4, DType::kF32, std::vector<float>(8), Bytes(32)};
  const Matrix b{3, 2, DType::kF32, std::vector<float>(6), Bytes(24)};
  const LoraDelta delta{factor_of(a), factor_of(b), 1, false};
  EXPECT_NO_THROW(check_lora_shapes(delta, {3, 4}, DType::kF32, "m.q_proj"));
  EXPECT_TRUE(testing::throws_error([&] { check_lora_shapes(delta, {4, 3}, DType::kF32, "m.q_proj"); },
                                    ErrorCode::kInvalidArgument, {"m.q_proj", "[4, 3]"}));
  EXPECT_TRUE(testing::throws_error([&] { check_lora_shapes(delta, {3, 4}, DType::kI8, "m.q_proj"); },
                                    ErrorCode::kUnsupported, {"m.q_proj", "I8"}));
  const LoraDelta transposed{factor_of(a), factor_of(b), 1, true};
  EXPECT_NO_THROW(check_lora_shapes(transposed, {4, 3}, DType::kF32, "m.c_attn"));
}

}  // namespace
}  // namespace reshard

namespace reshard {
namespace {

TEST(LoraMerge, ABoxOutsideTheWeightIsAnError) {
  std::mt19937_64 rng = testing::seeded_rng();
  const Matrix a = random_matrix(2, 4, DType::kF32, 1, rng), b = random_matrix(3, 2, DType::kF32, 1, rng);
  const LoraDelta delta{factor_of(a), factor_of(b), 1, false};
  Bytes w(2 * 4 * 4), out(w.size());
  EXPECT_TRUE(testing::throws_error(
      [&] { merge_lora_box(delta, Box({2, 0}, {2, 4}), DType::kF32, w, DType::kF32, out); },
      ErrorCode::kInvalidArgument, {"outside"}));
}

}  // namespace
}  // namespace reshard
