// The writer's plan: tensor order, JSON bytes, padding and refusals, as the
// reference writer has them.
#include <gtest/gtest.h>

#include "formats/json_escape.h"
#include "formats/support/safetensors_files.h"
#include "reshard/formats/safetensors_header.h"
#include "reshard/formats/safetensors_layout.h"
#include "reshard/layout/error.h"

namespace reshard::safetensors {

using formats_detail::json_quoted;

namespace {

using namespace std::string_literals;

std::vector<std::string> names_in_order(const FileLayout& layout) {
  std::vector<std::string> names;
  for (const TensorInfo& t : layout.header().tensors()) names.push_back(t.name);
  return names;
}

ErrorCode plan_error(std::vector<TensorSpec> specs, std::optional<Metadata> metadata = std::nullopt) {
  try {
    FileLayout::plan(std::move(specs), std::move(metadata));
  } catch (const Error& e) {
    return e.code();
  }
  ADD_FAILURE() << "planned without error";
  return ErrorCode::kParse;
}

TEST(SafetensorsLayout, OrdersByDtypeDescendingThenNameBytewise) {
  const FileLayout layout = FileLayout::plan({
      {"b", DType::kBool, {1}}, {"a", DType::kF32, {1}}, {"z", DType::kU64, {1}},
      {"\xc3\xa9", DType::kF32, {1}}, {"B", DType::kF32, {1}}, {"a.", DType::kF32, {1}},
      {"c", DType::kF4, {2}}, {"d", DType::kI64, {1}}, {"e", DType::kF64, {1}}, {"f", DType::kC64, {1}}});
  // U64 > I64 > F64 > C64 > F32 > ... > F4 > BOOL; within F32, bytes compare unsigned.
  EXPECT_EQ(names_in_order(layout),
            (std::vector<std::string>{"z", "d", "e", "f", "B", "a", "a.", "\xc3\xa9", "c", "b"}));
}

TEST(SafetensorsLayout, OffsetsAreContiguousFromZero) {
  const FileLayout layout = FileLayout::plan({{"x", DType::kF16, {3}}, {"y", DType::kF32, {2, 0}},
                                              {"s", DType::kI8, {}}, {"q", DType::kF6E2M3, {4}}});
  uint64_t expected = 0;
  for (const TensorInfo& t : layout.header().tensors()) {
    EXPECT_EQ(t.begin, expected) << t.name;
    expected = t.end;
  }
  EXPECT_EQ(layout.header().at("x").byte_size(), 6u);
  EXPECT_EQ(layout.header().at("y").byte_size(), 0u);
  EXPECT_EQ(layout.header().at("s").byte_size(), 1u);
  EXPECT_EQ(layout.header().at("q").byte_size(), 3u);
  EXPECT_EQ(layout.file_size(), layout.header_bytes().size() + 10);
}

TEST(SafetensorsLayout, HeaderIsCompactJsonPaddedWithSpacesToEight) {
  for (size_t length = 1; length <= 16; ++length) {
    const FileLayout layout = FileLayout::plan({{std::string(length, 'n'), DType::kU8, {2}}}, std::nullopt);
    const std::string json = "{\"" + std::string(length, 'n') + R"(":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})";
    const std::string& bytes = layout.header_bytes();
    ASSERT_EQ((bytes.size() - 8) % 8, 0u);
    EXPECT_EQ(bytes.substr(8, json.size()), json);
    EXPECT_EQ(bytes.substr(8 + json.size()), std::string(bytes.size() - 8 - json.size(), ' '));
    EXPECT_LT(bytes.size() - 8 - json.size(), 8u);
    // The length prefix counts the padding.
    EXPECT_EQ(testing::with_length_prefix(bytes.substr(8)), bytes);
  }
}

TEST(SafetensorsLayout, NamesAndMetadataUseTheReferenceEscapes) {
  const Metadata metadata = {{"format", "pt"}, {"k\"ey", "v/\xc3\xa9\x01"}};
  const FileLayout layout = FileLayout::plan({{"q\"\\\b\f\n\r\t\x01\x1f\x7f/\0."s, DType::kU8, {}}}, metadata);
  const std::string json =
      R"({"__metadata__":{"format":"pt","k\"ey":"v/)" "\xc3\xa9" R"(\u0001"},)"
      R"("q\"\\\b\f\n\r\t\u0001\u001f)" "\x7f" R"(/\u0000.":{"dtype":"U8","shape":[],"data_offsets":[0,1]}})";
  EXPECT_EQ(layout.header_bytes().substr(8, json.size()), json);
}

TEST(SafetensorsLayout, PlannedHeaderParsesBackToItself) {
  const FileLayout layout = FileLayout::plan({{"w\n", DType::kBF16, {4, 0, 2}}, {"s", DType::kF8E8M0, {}}},
                                             Metadata{{"a", "b"}});
  std::string file = layout.header_bytes() + std::string(layout.header().data_bytes(), '\0');
  const Header header = parse_header(testing::bytes_of(file), file.size(), "planned");
  EXPECT_TRUE(std::ranges::equal(header.tensors(), layout.header().tensors()));
  EXPECT_EQ(header.metadata(), layout.header().metadata());
}

TEST(SafetensorsLayout, RefusesWhatTheFormatCannotHold) {
  EXPECT_EQ(plan_error({{"__metadata__", DType::kU8, {1}}}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(plan_error({{"t", DType::kU8, {1}}, {"t", DType::kF32, {1}}}), ErrorCode::kDuplicateTensor);
  EXPECT_EQ(plan_error({{"t", DType::kF4, {3}}}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(plan_error({{"t", DType::kF64, {INT64_MAX / 2}}}), ErrorCode::kOverflow);
  EXPECT_EQ(plan_error({{"t", DType::kU8, {INT64_MAX}}, {"u", DType::kU8, {INT64_MAX}}, {"v", DType::kU8, {4}}}),
            ErrorCode::kOverflow);
  EXPECT_EQ(plan_error({}, Metadata{{"k", "a"}, {"k", "b"}}), ErrorCode::kInvalidArgument);
}

TEST(SafetensorsLayout, SameSpecsGiveTheSameLayoutInAnyOrder) {
  std::vector<TensorSpec> specs = {{"a", DType::kU8, {3}}, {"b", DType::kF32, {2}}, {"c", DType::kU8, {1}}};
  const FileLayout first = FileLayout::plan(specs);
  std::reverse(specs.begin(), specs.end());
  const FileLayout second = FileLayout::plan(specs);
  EXPECT_EQ(first.header_bytes(), second.header_bytes());
}

TEST(JsonEscape, EscapesExactlyAsSerdeJson) {
  std::string all;
  for (int byte = 0; byte < 0x20; ++byte) all.push_back(static_cast<char>(byte));
  const std::string quoted = json_quoted(all);
  EXPECT_EQ(quoted,
            "\"\\u0000\\u0001\\u0002\\u0003\\u0004\\u0005\\u0006\\u0007\\b\\t\\n\\u000b\\f\\r\\u000e\\u000f"
            "\\u0010\\u0011\\u0012\\u0013\\u0014\\u0015\\u0016\\u0017\\u0018\\u0019\\u001a\\u001b\\u001c"
            "\\u001d\\u001e\\u001f\"");
  EXPECT_EQ(json_quoted("a\"b\\c/d \x7f\xe4\xb8\xad"), "\"a\\\"b\\\\c/d \x7f\xe4\xb8\xad\"");
  EXPECT_EQ(json_quoted(""), "\"\"");
}

}  // namespace
}  // namespace reshard::safetensors
