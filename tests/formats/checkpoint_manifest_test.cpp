// The checkpoint manifest: what it writes reads back the same, and each kind
// of inconsistency is refused by name (tensor, chunk), an unknown version by
// its number, any edit by the checksum.
#include <gtest/gtest.h>

#include <string>

#include "reshard/formats/checkpoint_manifest.h"
#include "reshard/formats/checksum.h"
#include "reshard/layout/error.h"

namespace reshard::checkpoint {
namespace {

Manifest two_chunk_manifest() {
  Manifest manifest;
  manifest.metadata = safetensors::Metadata{{"step", "3"}};
  manifest.files = {{"data-00000.safetensors", 200}, {"data-00001.safetensors", 200}};
  TensorEntry w{"w", DType::kF32, {4, 2}, "layout", safetensors::Metadata{{"k", "v"}}, {}};
  w.chunks.push_back({Box({0, 0}, {2, 2}), "data-00000.safetensors", "w[0:2,0:2]", 80, 16, 1});
  w.chunks.push_back({Box({2, 0}, {2, 2}), "data-00001.safetensors", "w[2:4,0:2]", 80, 16, 2});
  TensorEntry s{"s", DType::kI64, {}, "", std::nullopt, {}};
  s.chunks.push_back({Box({}, {}), "data-00000.safetensors", "s[]", 96, 8, 3});
  TensorEntry e{"e", DType::kBF16, {0, 3}, "", std::nullopt, {}};
  manifest.tensors = {w, s, e};
  return manifest;
}

void expect_refused(const Manifest& manifest, ErrorCode code, const std::vector<std::string>& parts) {
  try {
    parse_manifest(serialize_manifest(manifest), "m.json");
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    for (const std::string& part : parts) EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << part << ": " << e.what();
  }
}

TEST(CheckpointManifest, ReadsBackWhatItWrites) {
  const Manifest manifest = two_chunk_manifest();
  EXPECT_EQ(parse_manifest(serialize_manifest(manifest), "m.json"), manifest);
  EXPECT_EQ(chunk_key("w", Box({2, 0}, {2, 2})), "w[2:4,0:2]");
  EXPECT_EQ(manifest.total_bytes(), 32u + 8u);
}

TEST(CheckpointManifest, RefusesChunksThatDoNotTileTheirTensor) {
  Manifest overlap = two_chunk_manifest();
  overlap.tensors[0].chunks[1].box = Box({1, 0}, {2, 2});
  expect_refused(overlap, ErrorCode::kInvalidManifest, {"\"w\"", "chunk 1", "overlaps"});
  Manifest hole = two_chunk_manifest();
  hole.tensors[0].chunks.pop_back();
  expect_refused(hole, ErrorCode::kInvalidManifest, {"\"w\"", "4 of its 8"});
  Manifest outside = two_chunk_manifest();
  outside.tensors[0].chunks[1].box = Box({3, 0}, {2, 2});
  expect_refused(outside, ErrorCode::kInvalidManifest, {"chunk 1", "not inside"});
  Manifest twice = two_chunk_manifest();
  twice.tensors[1].chunks.push_back(twice.tensors[1].chunks[0]);
  expect_refused(twice, ErrorCode::kInvalidManifest, {"\"s\""});
}

TEST(CheckpointManifest, RefusesLengthsOffsetsAndFilesThatDisagree) {
  Manifest length = two_chunk_manifest();
  length.tensors[0].chunks[0].length = 15;
  expect_refused(length, ErrorCode::kInvalidManifest, {"chunk 0", "length 15"});
  Manifest past = two_chunk_manifest();
  past.tensors[0].chunks[1].offset = 190;
  expect_refused(past, ErrorCode::kInvalidManifest, {"chunk 1", "pass the end"});
  Manifest unlisted = two_chunk_manifest();
  unlisted.tensors[0].chunks[1].file = "other.safetensors";
  expect_refused(unlisted, ErrorCode::kInvalidManifest, {"not listed"});
  Manifest escape = two_chunk_manifest();
  escape.files[1].name = "../data-00001.safetensors";
  expect_refused(escape, ErrorCode::kInvalidManifest, {"leaves the folder"});
  Manifest names = two_chunk_manifest();
  names.tensors[2].name = "w";
  expect_refused(names, ErrorCode::kInvalidManifest, {"appears twice"});
}

TEST(CheckpointManifest, AnUnknownVersionIsRefusedByNumberAndAnEditByChecksum) {
  const std::string good = serialize_manifest(two_chunk_manifest());
  std::string newer = good;
  newer.replace(newer.find("\"version\":1"), 11, "\"version\":7");
  try {
    parse_manifest(newer, "m.json");
    ADD_FAILURE() << "accepted version 7";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidManifest);
    EXPECT_NE(std::string(e.what()).find("unknown checkpoint format version 7"), std::string::npos) << e.what();
  }
  std::string edited = good;
  edited.replace(edited.find("\"step\":\"3\""), 10, "\"step\":\"4\"");
  try {
    parse_manifest(edited, "m.json");
    ADD_FAILURE() << "accepted an edit";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kChecksumMismatch) << e.what();
  }
  for (const std::string bad : {"", "[]", "{\"format\":\"other\",\"version\":1}", "{\"format\":\"reshard-checkpoint\"}"}) {
    EXPECT_THROW(parse_manifest(bad, "m.json"), Error) << bad;
  }
}

TEST(CheckpointManifest, ChecksumsAreSixteenHexDigits) {
  EXPECT_EQ(checksum_hex(0xabc), "0000000000000abc");
  EXPECT_EQ(parse_checksum_hex("0000000000000abc"), 0xabcu);
  EXPECT_FALSE(parse_checksum_hex("0000000000000ABC").has_value());
  EXPECT_FALSE(parse_checksum_hex("abc").has_value());
  // XXH64 of nothing, as the reference implementation gives it.
  EXPECT_EQ(checksum_hex(xxh64(std::string_view())), "ef46db3751d8e999");
}

}  // namespace
}  // namespace reshard::checkpoint
