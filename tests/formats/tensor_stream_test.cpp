// Streaming tensors out of files: pieces bounded, casts bit-exact (round to
// nearest even), integer and bool tensors never cast.
#include "reshard/formats/tensor_stream.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <limits>
#include <vector>

#include "formats/support/safetensors_files.h"
#include "layout/float_convert.h"
#include "layout/support/expect_error.h"
#include "reshard/formats/safetensors_writer.h"
#include "support/seed.h"

namespace reshard {

using layout_detail::f32_to_bf16;
using layout_detail::f32_to_f16;

namespace {

using safetensors::ReadMode;
using testing::ScratchDir;

constexpr ReadMode kModes[] = {ReadMode::kMmap, ReadMode::kPread};

std::vector<float> interesting_floats(std::mt19937_64& rng) {
  std::vector<float> values = {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 65520.0f, 1e-8f, 3.0e38f,
                               std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                               std::numeric_limits<float>::denorm_min()};
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 200; ++i) values.push_back(std::bit_cast<float>(bits(rng)));
  return values;
}

std::vector<std::byte> collect(const safetensors::File& file, const safetensors::TensorInfo& info, DType out,
                               size_t chunk, size_t* pieces = nullptr) {
  std::vector<std::byte> all;
  stream_tensor(file, info, out, [&](std::span<const std::byte> bytes) {
    EXPECT_LE(bytes.size(), std::max<size_t>(chunk, 4) * 2);
    all.insert(all.end(), bytes.begin(), bytes.end());
    if (pieces) ++*pieces;
  }, chunk);
  return all;
}

TEST(TensorStream, CastsF32ToBf16AndF16BitExactly) {
  auto rng = testing::seeded_rng();
  const std::vector<float> values = interesting_floats(rng);
  ScratchDir dir;
  const safetensors::TensorData data{{"w", DType::kF32, {static_cast<uint64_t>(values.size())}},
                                     std::as_bytes(std::span(values))};
  safetensors::write_file(dir / "f.safetensors", std::span(&data, 1));
  for (const ReadMode mode : kModes) {
    const auto file = safetensors::File::open(dir / "f.safetensors", mode);
    for (const DType out : {DType::kBF16, DType::kF16}) {
      const std::vector<std::byte> cast = collect(file, file.tensor("w"), out, 7);
      ASSERT_EQ(cast.size(), values.size() * 2);
      for (size_t i = 0; i < values.size(); ++i) {
        uint16_t got = 0;
        std::memcpy(&got, cast.data() + 2 * i, 2);
        const uint16_t want = out == DType::kBF16 ? f32_to_bf16(values[i]) : f32_to_f16(values[i]);
        EXPECT_EQ(got, want) << "element " << i << " = " << values[i];
      }
    }
  }
}

TEST(TensorStream, CopiesUncastTensorsInBoundedPieces) {
  auto rng = testing::seeded_rng();
  const std::vector<std::byte> bytes = testing::random_bytes(rng, 1000);
  ScratchDir dir;
  const safetensors::TensorData data{{"i", DType::kI32, {250}}, bytes};
  safetensors::write_file(dir / "i.safetensors", std::span(&data, 1));
  for (const ReadMode mode : kModes) {
    const auto file = safetensors::File::open(dir / "i.safetensors", mode);
    size_t pieces = 0;
    EXPECT_EQ(collect(file, file.tensor("i"), DType::kI32, 64, &pieces), bytes);
    EXPECT_EQ(pieces, 16u);  // ceil(1000 / 64)
  }
}

TEST(TensorStream, CastDtypeLeavesNonCastableTensorsAlone) {
  EXPECT_EQ(cast_dtype(DType::kF32, DType::kBF16), DType::kBF16);
  EXPECT_EQ(cast_dtype(DType::kBF16, DType::kF32), DType::kF32);
  EXPECT_EQ(cast_dtype(DType::kF16, std::nullopt), DType::kF16);
  for (const DType kept : {DType::kI32, DType::kU8, DType::kBool, DType::kI64, DType::kF64, DType::kF8E4M3}) {
    EXPECT_EQ(cast_dtype(kept, DType::kBF16), kept) << dtype_name(kept);
  }
}

TEST(TensorStream, RefusesCastingIntegers) {
  ScratchDir dir;
  const std::vector<std::byte> bytes(8);
  const safetensors::TensorData data{{"i", DType::kI32, {2}}, bytes};
  safetensors::write_file(dir / "i.safetensors", std::span(&data, 1));
  const auto file = safetensors::File::open(dir / "i.safetensors");
  EXPECT_TRUE(testing::throws_error([&] { collect(file, file.tensor("i"), DType::kF16, 64); },
                                    ErrorCode::kInvalidArgument, {"'i'", "I32", "F16"}));
}

}  // namespace
}  // namespace reshard
