// Property tests: random tensor sets written and read back in both modes, and
// random boxes read against a slice computed element by element.
#include <gtest/gtest.h>

#include <cstring>

#include "formats/json_escape.h"
#include "formats/support/random_tensors.h"
#include "formats/support/safetensors_files.h"
#include "layout/checked.h"
#include "reshard/formats/safetensors_reader.h"
#include "reshard/formats/safetensors_writer.h"
#include "reshard/layout/error.h"
#include "support/seed.h"

namespace reshard::safetensors {

using formats_detail::json_quoted;

namespace {

using testing::RandomTensor;
using testing::ScratchDir;

constexpr ReadMode kModes[] = {ReadMode::kMmap, ReadMode::kPread};

// The bytes of `box` in a row-major tensor, found element by element, or
// nullopt when a run of consecutive elements does not fall on whole bytes.
std::optional<std::vector<std::byte>> naive_box_bytes(const RandomTensor& tensor, const Box& box) {
  const Shape shape = layout_shape(tensor.spec.shape, tensor.spec.name);
  const auto bits = static_cast<int64_t>(dtype_bits(tensor.spec.dtype));
  std::vector<int64_t> linear;  // tensor element index of each box element, in order
  const int64_t volume = box.volume();
  std::vector<int64_t> index(box.rank());
  for (int64_t n = 0; n < volume; ++n) {
    int64_t rest = n, flat = 0;
    for (size_t d = box.rank(); d-- > 0;) {
      index[d] = box.origin()[d] + rest % box.shape()[d];
      rest /= box.shape()[d];
    }
    for (size_t d = 0; d < box.rank(); ++d) flat = flat * shape[d] + index[d];
    linear.push_back(flat);
  }
  std::vector<std::byte> out;
  for (size_t start = 0; start < linear.size();) {
    size_t stop = start + 1;
    while (stop < linear.size() && linear[stop] == linear[stop - 1] + 1) ++stop;
    const int64_t first_bit = linear[start] * bits;
    const int64_t length_bits = static_cast<int64_t>(stop - start) * bits;
    if (first_bit % 8 != 0 || length_bits % 8 != 0) return std::nullopt;
    const auto begin = tensor.bytes.begin() + first_bit / 8;
    out.insert(out.end(), begin, begin + length_bits / 8);
    start = stop;
  }
  return out;
}

Box random_box(std::mt19937_64& rng, const Shape& shape) {
  std::vector<int64_t> origin(shape.size()), extent(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    origin[d] = std::uniform_int_distribution<int64_t>(0, shape[d])(rng);
    extent[d] = std::uniform_int_distribution<int64_t>(0, shape[d] - origin[d])(rng);
  }
  return Box(origin, extent);
}

void expect_same_file(const File& file, const std::vector<RandomTensor>& tensors,
                      const std::optional<Metadata>& metadata) {
  EXPECT_EQ(file.metadata(), metadata);
  ASSERT_EQ(file.tensors().size(), tensors.size());
  for (const RandomTensor& want : tensors) {
    const TensorInfo& got = file.tensor(want.spec.name);
    EXPECT_EQ(got.dtype, want.spec.dtype);
    EXPECT_EQ(got.shape, want.spec.shape);
    std::vector<std::byte> bytes(got.byte_size());
    file.read(got, bytes);
    EXPECT_EQ(bytes, want.bytes) << json_quoted(want.spec.name);
    if (file.mode() == ReadMode::kMmap) {
      const auto view = file.view(got);
      EXPECT_TRUE(std::equal(view.begin(), view.end(), want.bytes.begin(), want.bytes.end()));
    }
  }
}

TEST(SafetensorsRoundTrip, RandomTensorSetsReadBackAsWritten) {
  std::mt19937_64 rng = testing::seeded_rng();
  ScratchDir dir;
  for (int round = 0; round < 60; ++round) {
    const std::vector<RandomTensor> tensors = testing::random_tensors(rng, 10);
    const std::optional<Metadata> metadata = testing::random_metadata(rng);
    const auto path = dir / "round.safetensors";
    write_file(path, testing::as_tensor_data(tensors), metadata);

    std::vector<TensorSpec> specs;
    for (const RandomTensor& t : tensors) specs.push_back(t.spec);
    const FileLayout layout = FileLayout::plan(specs, metadata);
    ASSERT_EQ(std::filesystem::file_size(path), layout.file_size());
    for (ReadMode mode : kModes) {
      const File file = File::open(path, mode);
      // The reader sees exactly what the writer planned.
      EXPECT_EQ(file.header().json_bytes(), layout.header().json_bytes());
      EXPECT_TRUE(std::ranges::equal(file.tensors(), layout.header().tensors()));
      expect_same_file(file, tensors, metadata);
    }
    ASSERT_FALSE(HasFailure()) << "round " << round;
  }
}

TEST(SafetensorsRoundTrip, RandomBoxesMatchAnElementByElementSlice) {
  std::mt19937_64 rng = testing::seeded_rng();
  ScratchDir dir;
  for (int round = 0; round < 20; ++round) {
    const std::vector<RandomTensor> tensors = testing::random_tensors(rng, 6);
    const auto path = dir / "boxes.safetensors";
    write_file(path, testing::as_tensor_data(tensors));
    for (ReadMode mode : kModes) {
      const File file = File::open(path, mode);
      for (const RandomTensor& tensor : tensors) {
        for (int b = 0; b < 8; ++b) {
          const Box box = random_box(rng, layout_shape(tensor.spec.shape, tensor.spec.name));
          SCOPED_TRACE(box.to_string() + " of " + std::string(dtype_name(tensor.spec.dtype)));
          const std::optional<std::vector<std::byte>> want = naive_box_bytes(tensor, box);
          const TensorInfo& info = file.tensor(tensor.spec.name);
          if (!want) {
            EXPECT_THROW(
                {
                  try {
                    std::vector<std::byte> out(File::box_bytes(info.dtype, box));
                    file.read_box(info, box, out);
                  } catch (const Error& e) {
                    EXPECT_EQ(e.code(), ErrorCode::kUnsupported) << e.what();
                    throw;
                  }
                },
                Error);
            continue;
          }
          std::vector<std::byte> got(want->size());
          file.read_box(info, box, got);
          EXPECT_EQ(got, *want);
        }
      }
    }
    ASSERT_FALSE(HasFailure()) << "round " << round;
  }
}

TEST(SafetensorsRoundTrip, StridedBoxesWithWideGapsReadEveryRun) {
  // Rows far apart (gaps past the joined-read limit) and rows close together.
  std::mt19937_64 rng = testing::seeded_rng();
  const RandomTensor wide{{"wide", DType::kU8, {5, 9000}}, testing::random_bytes(rng, 5 * 9000)};
  const RandomTensor narrow{{"narrow", DType::kI32, {300, 7}}, testing::random_bytes(rng, 300 * 7 * 4)};
  ScratchDir dir;
  write_file(dir / "strided.safetensors", testing::as_tensor_data({wide, narrow}));
  const File file = File::open(dir / "strided.safetensors", ReadMode::kPread);
  for (const auto& [tensor, box] : {std::pair{&wide, Box({0, 10}, {5, 3})}, std::pair{&wide, Box({1, 0}, {3, 9000})},
                                    std::pair{&narrow, Box({0, 2}, {300, 1})}, std::pair{&narrow, Box({7, 0}, {290, 5})}}) {
    SCOPED_TRACE(box.to_string());
    std::vector<std::byte> got(File::box_bytes(tensor->spec.dtype, box));
    file.read_box(file.tensor(tensor->spec.name), box, got);
    EXPECT_EQ(got, naive_box_bytes(*tensor, box).value());
  }
}

TEST(SafetensorsRoundTrip, ReaderRefusesBadRequests) {
  ScratchDir dir;
  const std::vector<std::byte> bytes(24, std::byte{7});
  write_file(dir / "t.safetensors", std::vector<TensorData>{{{"t", DType::kF32, {2, 3}}, bytes}});
  auto code_of = [](const auto& call) {
    try {
      call();
    } catch (const Error& e) {
      return e.code();
    }
    return ErrorCode::kParse;  // stands for "no error" here: no test expects kParse
  };
  for (ReadMode mode : kModes) {
    const File file = File::open(dir / "t.safetensors", mode);
    const TensorInfo& t = file.tensor("t");
    std::vector<std::byte> out(8);
    EXPECT_EQ(code_of([&] { file.read(t, 20, out); }), ErrorCode::kInvalidArgument);
    EXPECT_EQ(code_of([&] { file.read(t, out); }), ErrorCode::kInvalidArgument);
    EXPECT_EQ(code_of([&] { file.read_box(t, Box({0, 0}, {1, 2}), out); }), ErrorCode::kParse);
    EXPECT_EQ(code_of([&] { file.read_box(t, Box({1, 2}, {1, 2}), out); }), ErrorCode::kInvalidArgument);
    EXPECT_EQ(code_of([&] { file.read_box(t, Box({0}, {2}), out); }), ErrorCode::kInvalidArgument);
    EXPECT_EQ(code_of([&] { file.read_box(t, Box({0, 0}, {1, 1}), out); }), ErrorCode::kInvalidArgument);
    EXPECT_EQ(code_of([&] { file.tensor("missing"); }), ErrorCode::kMissingTensor);
    const TensorInfo foreign{"t", DType::kF32, {2, 3}, 0, 1000};
    EXPECT_EQ(code_of([&] { file.read(foreign, 0, out); }), ErrorCode::kInvalidArgument);
    EXPECT_EQ(code_of([&] { file.view(t); }),
              mode == ReadMode::kMmap ? ErrorCode::kParse : ErrorCode::kUnsupported);
    EXPECT_EQ(code_of([&] { File::box_bytes(DType::kF4, Box({0}, {3})); }), ErrorCode::kUnsupported);
  }
}

}  // namespace
}  // namespace reshard::safetensors
