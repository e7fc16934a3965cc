// Every rule the reader checks, one crafted file each, in both read
// modes: the right typed error, naming the file and the tensor at fault.
#include <gtest/gtest.h>

#include <optional>

#include <fmt/format.h>

#include "formats/support/safetensors_files.h"
#include "reshard/formats/file_rules.h"
#include "reshard/formats/safetensors_reader.h"
#include "reshard/layout/error.h"

namespace reshard::safetensors {
namespace {

using namespace std::string_literals;
using testing::ScratchDir;
using testing::with_length_prefix;

std::string entry(std::string_view name, std::string_view dtype, std::string_view shape,
                  uint64_t begin, uint64_t end) {
  return fmt::format(R"("{}":{{"dtype":"{}","shape":{},"data_offsets":[{},{}]}})", name, dtype,
                     shape, begin, end);
}

// `{entries...}`: a header object from entries.
std::string object_of(std::initializer_list<std::string> entries) {
  std::string json = "{";
  for (const std::string& e : entries) {
    if (json.size() > 1) json += ',';
    json += e;
  }
  json += '}';
  return json;
}

// A file of `json` (prefixed by its length) and `data_bytes` zero bytes.
std::string file_of(std::string_view json, size_t data_bytes) {
  return with_length_prefix(json) + std::string(data_bytes, '\0');
}

// Opens `bytes` as a file in both modes; both must agree. Returns the error.
std::optional<Error> open_error(const std::string& bytes) {
  ScratchDir dir;
  const auto path = dir / "crafted.safetensors";
  testing::write_file_text(path, bytes);
  std::optional<Error> errors[2];
  const ReadMode modes[2] = {ReadMode::kMmap, ReadMode::kPread};
  for (int i = 0; i < 2; ++i) {
    try {
      File::open(path, modes[i]);
    } catch (const Error& e) {
      errors[i] = e;
      EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos)
          << "the message should name the file: " << e.what();
    }
  }
  EXPECT_EQ(errors[0].has_value(), errors[1].has_value());
  if (errors[0] && errors[1]) {
    EXPECT_EQ(errors[0]->code(), errors[1]->code());
    EXPECT_EQ(std::string(errors[0]->what()), std::string(errors[1]->what()));
  }
  return errors[0];
}

void expect_error(const std::string& bytes, ErrorKind kind, std::string_view tensor = {}) {
  const std::optional<Error> error = open_error(bytes);
  ASSERT_TRUE(error.has_value()) << "expected " << kind << ", the file opened";
  EXPECT_EQ(error->kind(), kind) << error->what();
  if (!tensor.empty()) {
    EXPECT_NE(std::string(error->what()).find(fmt::format("tensor \"{}\"", tensor)), std::string::npos)
        << "the message should name tensor " << tensor << ": " << error->what();
  }
}

void expect_opens(const std::string& bytes) {
  const std::optional<Error> error = open_error(bytes);
  EXPECT_FALSE(error.has_value()) << error->what();
}

// ---- 1-3: the length prefix ----

TEST(SafetensorsReaderErrors, FewerThanEightBytesIsHeaderTooSmall) {
  expect_error("", file_rule::kHeaderTooSmall);
  expect_error(std::string(7, '\0'), file_rule::kHeaderTooSmall);
}

TEST(SafetensorsReaderErrors, LengthPastTheLimitIsHeaderTooLarge) {
  std::string bytes = with_length_prefix("{}");
  const uint64_t n = 100'000'001;
  for (int i = 0; i < 8; ++i) bytes[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xFF);
  expect_error(bytes, file_rule::kHeaderTooLarge);
  expect_error(std::string(8, '\xff'), file_rule::kHeaderTooLarge);
}

TEST(SafetensorsReaderErrors, LengthPastTheEndIsInvalidHeaderLength) {
  std::string bytes = with_length_prefix("{}      ");
  bytes.pop_back();
  expect_error(bytes, file_rule::kInvalidHeaderLength);
  // The largest allowed length, in a short file.
  std::string largest = with_length_prefix("{}");
  const uint64_t n = 100'000'000;
  for (int i = 0; i < 8; ++i) largest[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xFF);
  expect_error(largest, file_rule::kInvalidHeaderLength);
}

// ---- 4: UTF-8 ----

TEST(SafetensorsReaderErrors, InvalidUtf8IsCaughtBeforeJson) {
  for (std::string bad : {"\xff", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xe2\x82"}) {
    SCOPED_TRACE(testing::sha256_hex(testing::bytes_of(bad)));
    // Invalid UTF-8 inside a string of otherwise valid JSON, and in broken JSON.
    expect_error(file_of(std::string("{\"") + bad + "\":1}", 0), file_rule::kInvalidHeaderUtf8);
    expect_error(file_of(std::string("not json ") + bad, 0), file_rule::kInvalidHeaderUtf8);
  }
}

TEST(SafetensorsReaderErrors, ValidUtf8NamesOpen) {
  expect_opens(file_of(object_of({entry("\xc3\xbcn\xc3\xaf \xf0\x9f\x98\x80 \xe2\x82\xac", "U8", "[1]", 0, 1)}), 1));
}

// ---- 5: JSON of the expected form ----

TEST(SafetensorsReaderErrors, MalformedJsonIsInvalidHeaderJson) {
  const std::string good = entry("t", "F32", "[1]", 0, 4);
  for (const std::string& json : {
           std::string("not json"), std::string("[]"), std::string("\"str\""), std::string("{"),
           std::string("{\"t\":}"), std::string("{") + good + ",}", std::string("{") + good + "}x", std::string("{} {}"),
           std::string("{") + good + "}\0\0\0"s, std::string("{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}")}) {
    SCOPED_TRACE(json);
    expect_error(file_of(json, 4), file_rule::kInvalidHeaderJson);
  }
}

TEST(SafetensorsReaderErrors, BadEntryTypesAreInvalidHeaderJsonNamingTheTensor) {
  for (const std::string& value : {
           std::string(R"({"dtype":1,"shape":[1],"data_offsets":[0,4]})"),
           std::string(R"({"dtype":"F128","shape":[1],"data_offsets":[0,4]})"),
           std::string(R"({"dtype":"f32","shape":[1],"data_offsets":[0,4]})"),
           std::string(R"({"dtype":"F32","shape":"1","data_offsets":[0,4]})"),
           std::string(R"({"dtype":"F32","shape":[-1],"data_offsets":[0,4]})"),
           std::string(R"({"dtype":"F32","shape":[1.0],"data_offsets":[0,4]})"),
           std::string(R"({"dtype":"F32","shape":[1e0],"data_offsets":[0,4]})"),
           std::string(R"({"dtype":"F32","shape":[18446744073709551616],"data_offsets":[0,4]})"),
           std::string(R"({"dtype":"F32","shape":[1],"data_offsets":[0,4,8]})"),
           std::string(R"({"dtype":"F32","shape":[1],"data_offsets":[0]})"),
           std::string(R"({"dtype":"F32","shape":[1],"data_offsets":[-0,4]})"),
           std::string(R"({"dtype":"F32","shape":[1]})"),
           std::string(R"({"shape":[1],"data_offsets":[0,4]})"),
           std::string(R"({"dtype":"F32","dtype":"F32","shape":[1],"data_offsets":[0,4]})"),
           std::string(R"({"dtype":"F32","shape":[1],"data_offsets":[0,4],"extra":1e400})"),
           std::string(R"(["F32",[1]])"), std::string("7"), std::string("null")}) {
    SCOPED_TRACE(value);
    expect_error(file_of(std::string(R"({"weird":)") + value + "}", 4), file_rule::kInvalidHeaderJson, "weird");
  }
}

TEST(SafetensorsReaderErrors, MetadataMustMapStringsToStrings) {
  const std::string tensor = entry("t", "U8", "[1]", 0, 1);
  for (const std::string& metadata : {std::string(R"({"format":1})"), std::string(R"({"a":null})"),
                                      std::string(R"({"a":{"b":"c"}})"), std::string(R"(["pt"])"),
                                      std::string(R"("pt")")}) {
    SCOPED_TRACE(metadata);
    expect_error(file_of(std::string(R"({"__metadata__":)") + metadata + "," + tensor + "}", 1),
                 file_rule::kInvalidHeaderJson);
  }
  expect_error(file_of(std::string(R"({"__metadata__":{},"__metadata__":{},)") + tensor + "}", 1),
               file_rule::kInvalidHeaderJson);
}

TEST(SafetensorsReaderErrors, StringsFollowJsonRules) {
  for (const std::string& name : {std::string("a\tb"), std::string("\\x"), std::string("\\ud800"),
                                  std::string("\\udc00"), std::string("\\ud800\\u0041"), std::string("\\u12G4")}) {
    SCOPED_TRACE(name);
    expect_error(file_of(object_of({entry(name, "U8", "[1]", 0, 1)}), 1), file_rule::kInvalidHeaderJson);
  }
}

TEST(SafetensorsReaderErrors, NestingIsLimitedLikeTheReference) {
  // The object is level 1, the entry level 2; "x" adds levels 3 and up.
  auto nested = [](int levels) {
    return std::string(static_cast<size_t>(levels), '[') + std::string(static_cast<size_t>(levels), ']');
  };
  const std::string head = R"({"t":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":)";
  expect_opens(file_of(head + nested(125) + "}}", 1));
  expect_error(file_of(head + nested(126) + "}}", 1), file_rule::kInvalidHeaderJson, "t");
}

TEST(SafetensorsReaderErrors, AcceptedFormsOpen) {
  const std::string t = entry("t", "U8", "[1]", 0, 1);
  // Whitespace around and inside, unknown fields of any JSON type, null metadata.
  expect_opens(file_of(std::string(" \t\r\n{ ") + t + " } \n  ", 1));
  expect_opens(file_of(R"({"t":{"x":{"y":[1,2.5e3,-7,true,false,null,"s"]},"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", 1));
  expect_opens(file_of(std::string(R"({"__metadata__":null,)") + t + "}", 1));
  expect_opens(file_of(std::string(R"({"__metadata__":{"a":"b","a":"c"},)") + t + "}", 1));
  // serde reads a struct from the list of its fields too.
  expect_opens(file_of(R"({"t":["U8",[1],[0,1]]})", 1));
  // Escapes decode; "\/" is "/".
  expect_opens(file_of(R"({"a\/b\u00e9\ud83d\ude00\n":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", 1));
  // Key order inside an entry is free.
  expect_opens(file_of(R"({"t":{"data_offsets":[0,1],"shape":[1],"dtype":"U8"}})", 1));
}

// The reference reads the header into a map: of a repeated name the last
// entry wins, and the offset walk then judges what is left.
TEST(SafetensorsReaderErrors, ARepeatedNameKeepsItsLastEntry) {
  const std::string json = object_of({entry("t", "U8", "[1]", 0, 1), entry("t", "U8", "[1]", 1, 2)});
  expect_error(file_of(json, 2), file_rule::kInvalidOffset, "t");
  // Same name spelt with an escape; the last entry is whole on its own.
  const std::string escaped = object_of(
      {entry("t", "U8", "[3]", 0, 3), entry("u", "U8", "[2]", 2, 4), entry("\\u0074", "U8", "[2]", 0, 2)});
  ScratchDir dir;
  testing::write_file_text(dir / "r.safetensors", file_of(escaped, 4));
  for (ReadMode mode : {ReadMode::kMmap, ReadMode::kPread}) {
    const File file = File::open(dir / "r.safetensors", mode);
    ASSERT_EQ(file.tensors().size(), 2u);
    EXPECT_EQ(file.tensor("t").end, 2u);
    EXPECT_EQ(file.tensor("t").shape, Dims{2});
    EXPECT_EQ(file.header().repeated_names(), std::vector<std::string>{"t"});
  }
  // A header without repeats says so.
  testing::write_file_text(dir / "s.safetensors", file_of(object_of({entry("t", "U8", "[1]", 0, 1)}), 1));
  EXPECT_TRUE(File::open(dir / "s.safetensors").header().repeated_names().empty());
}

// ---- 6: the offset walk ----

TEST(SafetensorsReaderErrors, GapsOverlapsAndAWrongStartAreInvalidOffset) {
  // The first tensor not at 0.
  expect_error(file_of(object_of({entry("a", "U8", "[1]", 1, 2)}), 2), file_rule::kInvalidOffset, "a");
  // A gap before b.
  expect_error(file_of(object_of({entry("a", "U8", "[1]", 0, 1), entry("b", "U8", "[1]", 2, 3)}), 3),
               file_rule::kInvalidOffset, "b");
  // b overlaps a.
  expect_error(file_of(object_of({entry("a", "U8", "[2]", 0, 2), entry("b", "U8", "[2]", 1, 3)}), 3),
               file_rule::kInvalidOffset, "b");
  // end before begin.
  expect_error(file_of(object_of({entry("a", "U8", "[0]", 0, 0), entry("b", "U8", "[0]", 0, 5), entry("c", "U8", "[0]", 5, 2)}), 5),
               file_rule::kInvalidTensorInfo, "b");
  expect_error(file_of(object_of({entry("a", "U8", "[3]", 0, 3), entry("c", "U8", "[0]", 3, 2)}), 3),
               file_rule::kInvalidOffset, "c");
}

TEST(SafetensorsReaderErrors, EntriesAreWalkedInOffsetOrderNotJsonOrder) {
  expect_opens(file_of(object_of({entry("b", "U8", "[1]", 1, 2), entry("a", "U8", "[1]", 0, 1)}), 2));
}

// ---- 7-8: sizes ----

TEST(SafetensorsReaderErrors, ElementOrBitCountOverflowIsValidationOverflow) {
  expect_error(file_of(object_of({entry("big", "U8", "[4294967296,4294967296]", 0, 0)}), 0),
               file_rule::kValidationOverflow, "big");
  // 2^61 elements fit, their bits do not.
  expect_error(file_of(object_of({entry("bits", "F64", "[2305843009213693952]", 0, 0)}), 0),
               file_rule::kValidationOverflow, "bits");
  // The largest usize parses (then overflows); one more does not parse at all.
  expect_error(file_of(object_of({entry("max", "U8", "[18446744073709551615]", 0, 0)}), 0),
               file_rule::kValidationOverflow, "max");
  expect_error(file_of(object_of({entry("max", "U8", "[18446744073709551616]", 0, 0)}), 0),
               file_rule::kInvalidHeaderJson, "max");
  expect_error(file_of(object_of({entry("max", "U8", "[99999999999999999999]", 0, 0)}), 0),
               file_rule::kInvalidHeaderJson, "max");
}

// Dimensions are usize, as in the reference: past 2^63 they are held exactly,
// and a zero-element tensor may have any other dimension.
TEST(SafetensorsReaderErrors, ZeroElementsWithHugeDimensionsAreAccepted) {
  ScratchDir dir;
  const std::string json = object_of({entry("huge", "U8", "[0,18446744073709551615]", 0, 0),
                                      entry("half", "F64", "[9223372036854775808,0]", 0, 0)});
  testing::write_file_text(dir / "h.safetensors", file_of(json, 0));
  const File file = File::open(dir / "h.safetensors");
  EXPECT_EQ(file.tensor("huge").shape, (Dims{0, UINT64_MAX}));
  EXPECT_EQ(file.tensor("half").shape, (Dims{uint64_t{1} << 63, 0}));
  EXPECT_EQ(file.tensor("huge").elements(), 0u);
  // As a layout shape it cannot be held: refused by name, not wrapped to -1.
  try {
    layout_shape(file.tensor("huge").shape, "huge");
    ADD_FAILURE() << "a dimension past int64 became a layout shape";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("18446744073709551615"), std::string::npos) << e.what();
  }
  // The same dimension with elements overflows.
  expect_error(file_of(object_of({entry("huge", "U8", "[1,18446744073709551615]", 0, 0)}), 0),
               file_rule::kValidationOverflow, "huge");
  expect_error(file_of(object_of({entry("huge", "U8", "[2,18446744073709551615]", 0, 0)}), 0),
               file_rule::kValidationOverflow, "huge");
}

TEST(SafetensorsReaderErrors, SizeDisagreeingWithShapeIsInvalidTensorInfo) {
  expect_error(file_of(object_of({entry("w", "F32", "[2,3]", 0, 20)}), 20), file_rule::kInvalidTensorInfo, "w");
  // Three F4 elements are 12 bits: not whole bytes, the reference's misaligned slice.
  expect_error(file_of(object_of({entry("q", "F4", "[3]", 0, 1)}), 1), file_rule::kMisalignedSlice, "q");
  expect_error(file_of(object_of({entry("q", "F6_E3M2", "[1]", 0, 1)}), 1), file_rule::kMisalignedSlice, "q");
  expect_opens(file_of(object_of({entry("q", "F4", "[4]", 0, 2), entry("r", "F6_E2M3", "[4]", 2, 5)}), 5));
}

// ---- 9: the buffer ----

TEST(SafetensorsReaderErrors, TruncatedOrTrailingDataIsIncompleteBuffer) {
  const std::string json = object_of({entry("w", "F32", "[2]", 0, 8)});
  expect_error(file_of(json, 7), file_rule::kIncompleteBuffer);
  expect_error(file_of(json, 9), file_rule::kIncompleteBuffer);
  expect_opens(file_of(json, 8));
  expect_error(file_of("{}", 1), file_rule::kIncompleteBuffer);
}

// ---- the order of the rules ----

TEST(SafetensorsReaderErrors, RulesApplyInTheSpecOrder) {
  // Too large wins over past the end.
  std::string large = std::string(8, '\0');
  large[4] = 1;  // 2^32 bytes of header
  expect_error(large, file_rule::kHeaderTooLarge);
  // Of a repeated name the last entry is the one the offsets are walked with.
  expect_error(file_of(object_of({entry("t", "U8", "[1]", 0, 1), entry("t", "U8", "[1]", 5, 6)}), 1),
               file_rule::kInvalidOffset, "t");
  expect_opens(file_of(object_of({entry("t", "U8", "[1]", 5, 6), entry("t", "U8", "[1]", 0, 1)}), 1));
  // JSON form wins over offsets: the bad dtype is found even though offsets are wrong too.
  expect_error(file_of(object_of({entry("a", "U8", "[1]", 3, 4), entry("b", "X", "[1]", 0, 1)}), 4),
               file_rule::kInvalidHeaderJson, "b");
  // Offsets, sizes and the buffer are checked tensor by tensor as the
  // reference walks them: a is checked whole before b.
  expect_error(file_of(object_of({entry("a", "U8", "[2]", 0, 1), entry("b", "U8", "[1]", 5, 6)}), 6),
               file_rule::kInvalidTensorInfo, "a");
  expect_error(file_of(object_of({entry("a", "U8", "[1]", 0, 1), entry("b", "U8", "[2]", 5, 7)}), 7),
               file_rule::kInvalidOffset, "b");
  // The buffer check comes last.
  expect_error(file_of(object_of({entry("a", "U8", "[2]", 0, 1)}), 0), file_rule::kInvalidTensorInfo, "a");
}

TEST(SafetensorsReaderErrors, AMissingFileIsAnIoError) {
  ScratchDir dir;
  for (ReadMode mode : {ReadMode::kMmap, ReadMode::kPread}) {
    try {
      File::open(dir / "absent.safetensors", mode);
      FAIL() << "opened a missing file";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kIo);
      EXPECT_NE(std::string(e.what()).find("absent.safetensors"), std::string::npos);
    }
    EXPECT_THROW(File::open(dir.path(), mode), Error);
  }
}

TEST(SafetensorsReaderErrors, ParseHeaderWorksOnMemoryAlone) {
  const std::string bytes = file_of(object_of({entry("w", "U8", "[3]", 0, 3)}), 3);
  const Header header = parse_header(testing::bytes_of(bytes), bytes.size(), "memory");
  EXPECT_EQ(header.at("w").byte_size(), 3u);
  EXPECT_EQ(header.file_size(), bytes.size());
  try {
    parse_header(testing::bytes_of(bytes), bytes.size() + 1, "memory");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), file_rule::kIncompleteBuffer);
    EXPECT_EQ(std::string(e.what()).rfind("memory: ", 0), 0u) << e.what();
  }
}

}  // namespace
}  // namespace reshard::safetensors
