// Byte-exact agreement with the reference writer: the spec's golden bytes and
// the files in golden/safetensors, read and written again.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "formats/support/safetensors_files.h"
#include "reshard/formats/safetensors_layout.h"
#include "reshard/formats/safetensors_reader.h"
#include "reshard/formats/safetensors_writer.h"

namespace reshard::safetensors {
namespace {

using testing::ScratchDir;

const std::filesystem::path kGolden = std::filesystem::path(RESHARD_SHARED_DIR) / "golden" / "safetensors";

nlohmann::json expected_files() {
  std::ifstream in(kGolden / "expected.json");
  return nlohmann::json::parse(in).at("files");
}

TEST(SafetensorsGolden, EmptyFileIsEightBytesOfLengthThenBracesAndSixSpaces) {
  const FileLayout layout = FileLayout::plan({}, std::nullopt);
  EXPECT_EQ(layout.header_bytes(), std::string("\x08\0\0\0\0\0\0\0{}      ", 16));
  EXPECT_EQ(layout.file_size(), 16u);
}

TEST(SafetensorsGolden, OneF32TensorNeedsNoPadding) {
  const FileLayout layout = FileLayout::plan({{"attn.0", DType::kF32, {1, 2, 3}}}, std::nullopt);
  const std::string json = R"({"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}})";
  ASSERT_EQ(json.size(), 64u);
  EXPECT_EQ(layout.header_bytes(), testing::with_length_prefix(json));
  EXPECT_EQ(layout.header().data_start(), 72u);
  EXPECT_EQ(layout.file_size(), 96u);
}

TEST(SafetensorsGolden, DefaultMetadataComesFirst) {
  const FileLayout layout = FileLayout::plan({{"b", DType::kU8, {1}}});
  const std::string json = R"({"__metadata__":{"format":"pt"},"b":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})";
  EXPECT_EQ(layout.header_bytes().substr(8, json.size()), json);
}

class ReferenceFile : public ::testing::TestWithParam<std::string> {};

TEST_P(ReferenceFile, ReadsAsExpected) {
  const nlohmann::json expected = expected_files().at(GetParam());
  for (ReadMode mode : {ReadMode::kMmap, ReadMode::kPread}) {
    const File file = File::open(kGolden / GetParam(), mode);
    EXPECT_EQ(file.header().json_bytes(), expected.at("header_len").get<uint64_t>());
    if (expected.at("metadata").is_null()) {
      EXPECT_FALSE(file.metadata().has_value());
    } else {
      ASSERT_TRUE(file.metadata().has_value());
      nlohmann::json metadata = nlohmann::json::object();
      for (const auto& [key, value] : *file.metadata()) metadata[key] = value;
      EXPECT_EQ(metadata, expected.at("metadata"));
    }
    ASSERT_EQ(file.tensors().size(), expected.at("tensors").size());
    for (const nlohmann::json& want : expected.at("tensors")) {
      const std::string name = want.at("name");
      SCOPED_TRACE(name);
      const TensorInfo& tensor = file.tensor(name);
      EXPECT_EQ(dtype_name(tensor.dtype), want.at("dtype").get<std::string>());
      EXPECT_EQ(tensor.shape, want.at("shape").get<safetensors::Dims>());
      EXPECT_EQ(tensor.begin, want.at("data_offsets")[0].get<uint64_t>());
      EXPECT_EQ(tensor.end, want.at("data_offsets")[1].get<uint64_t>());
      std::vector<std::byte> bytes(tensor.byte_size());
      file.read(tensor, bytes);
      EXPECT_EQ(testing::sha256_hex(bytes), want.at("sha256").get<std::string>());
    }
  }
}

TEST_P(ReferenceFile, WritingItsTensorsAgainGivesTheSameBytes) {
  const File file = File::open(kGolden / GetParam());
  std::vector<TensorData> tensors;
  // Listed in reverse file order: the writer must find the reference order itself.
  for (auto it = file.tensors().rbegin(); it != file.tensors().rend(); ++it) {
    tensors.push_back({{it->name, it->dtype, it->shape}, file.view(*it)});
  }
  ScratchDir dir;
  write_file(dir / "again.safetensors", tensors, file.metadata());
  EXPECT_EQ(testing::read_file_text(dir / "again.safetensors"),
            testing::read_file_text(kGolden / GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Golden, ReferenceFile,
                         ::testing::Values("basic.safetensors", "dtypes.safetensors", "edge.safetensors"),
                         [](const auto& param_info) { return param_info.param.substr(0, param_info.param.find('.')); });

TEST(SafetensorsGolden, EveryReferenceFileIsCovered) {
  const nlohmann::json files = expected_files();
  for (const auto& [name, unused] : files.items()) {
    EXPECT_TRUE(name == "basic.safetensors" || name == "dtypes.safetensors" || name == "edge.safetensors")
        << name << " is not in the parameterized list";
  }
}

}  // namespace
}  // namespace reshard::safetensors
