// The checkpoint manifest: what it writes reads back the same, and each kind
// of inconsistency is refused by name (tensor, chunk), an unknown version by
// its number, any edit by the checksum.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "formats/checksum.h"
#include "reshard/formats/checkpoint_manifest.h"
#include "reshard/formats/file_rules.h"
#include "reshard/layout/error.h"

namespace reshard::checkpoint {

using formats_detail::BlockChecksums;
using formats_detail::BlockHasher;
using formats_detail::checksum_hex;
using formats_detail::parse_checksum_hex;
using formats_detail::xxh64;

namespace {

Manifest two_chunk_manifest() {
  Manifest manifest;
  manifest.metadata = safetensors::Metadata{{"step", "3"}};
  manifest.files = {{"data-00000.safetensors", 200}, {"data-00001.safetensors", 200}};
  manifest.block_bytes = 6;  // 16-byte chunks: blocks of 6, 6 and 4
  TensorEntry w{"w", DType::kF32, {4, 2}, "layout", safetensors::Metadata{{"k", "v"}}, {}};
  w.chunks.push_back({Box({0, 0}, {2, 2}), "data-00000.safetensors", "w[0:2,0:2]", 80, 16, 1, {11, 12, 13}});
  w.chunks.push_back({Box({2, 0}, {2, 2}), "data-00001.safetensors", "w[2:4,0:2]", 80, 16, 2, {21, 22, 23}});
  TensorEntry s{"s", DType::kI64, {}, "", std::nullopt, {}};
  s.chunks.push_back({Box({}, {}), "data-00000.safetensors", "s[]", 96, 8, 3, {31, 32}});
  TensorEntry e{"e", DType::kBF16, {0, 3}, "", std::nullopt, {}};
  manifest.tensors = {w, s, e};
  return manifest;
}

void expect_refused(const Manifest& manifest, ErrorKind kind, const std::vector<std::string>& parts) {
  try {
    parse_manifest(serialize_manifest(manifest), "m.json");
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    for (const std::string& part : parts) EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << part << ": " << e.what();
  }
}

// Version 1: one checksum per chunk, no blocks.
Manifest version_1(Manifest manifest) {
  manifest.block_bytes = 0;
  for (TensorEntry& tensor : manifest.tensors) {
    for (Chunk& chunk : tensor.chunks) chunk.blocks.clear();
  }
  return manifest;
}

TEST(CheckpointManifest, ReadsBackWhatItWrites) {
  const Manifest manifest = two_chunk_manifest();
  const std::string text = serialize_manifest(manifest);
  EXPECT_NE(text.find("\"version\":2"), std::string::npos) << text;
  EXPECT_NE(text.find("\"block_bytes\":6"), std::string::npos) << text;
  EXPECT_NE(text.find("\"blocks\":[\"000000000000000b\",\"000000000000000c\",\"000000000000000d\"]"),
            std::string::npos)
      << text;
  EXPECT_EQ(parse_manifest(text, "m.json"), manifest);
  EXPECT_EQ(manifest.version(), 2);
  EXPECT_EQ(chunk_key("w", Box({2, 0}, {2, 2})), "w[2:4,0:2]");
  EXPECT_EQ(manifest.total_bytes(), 32u + 8u);
}

TEST(CheckpointManifest, ReadsVersion1WithOneChecksumPerChunk) {
  const Manifest old = version_1(two_chunk_manifest());
  const std::string text = serialize_manifest(old);
  EXPECT_NE(text.find("\"version\":1"), std::string::npos) << text;
  EXPECT_EQ(text.find("block"), std::string::npos) << text;
  EXPECT_EQ(parse_manifest(text, "m.json"), old);
  EXPECT_EQ(old.version(), 1);
}

TEST(CheckpointManifest, RefusesBlockChecksumsThatDoNotMatchTheChunk) {
  Manifest few = two_chunk_manifest();
  few.tensors[0].chunks[1].blocks.pop_back();
  expect_refused(few, file_rule::kInvalidManifest, {"\"w\"", "chunk 1", "2 block checksums for 16 bytes in blocks of 6"});
  Manifest many = two_chunk_manifest();
  many.tensors[1].chunks[0].blocks.push_back(0);
  expect_refused(many, file_rule::kInvalidManifest, {"\"s\"", "chunk 0", "expected 2"});
  // A version 2 body needs a positive block size and every chunk's list.
  const std::string good = serialize_manifest(two_chunk_manifest());
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"\"block_bytes\":6", "\"block_bytes\":0"},
           {"\"block_bytes\":6,", ""},
           {",\"blocks\":[\"000000000000001f\",\"0000000000000020\"]", ""},
           {"\"0000000000000020\"", "\"20\""}}) {
    std::string body = good.substr(good.find("\"manifest\":") + 11);
    body.pop_back();  // the newline
    body.pop_back();  // the closing brace of the file object
    const size_t at = body.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    body.replace(at, from.size(), to);
    const std::string file = "{\"format\":\"reshard-checkpoint\",\"version\":2,\"checksum\":\"xxh64:" +
                             checksum_hex(xxh64(nlohmann::ordered_json::parse(body).dump())) + "\",\"manifest\":" + body + "}";
    try {
      parse_manifest(file, "m.json");
      ADD_FAILURE() << "accepted " << to;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), file_rule::kInvalidManifest) << e.what();
    }
  }
}

TEST(CheckpointManifest, HashesBlocksAndTheWholeInOnePass) {
  std::vector<std::byte> bytes(1000);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::byte>(i * 7 + 3);
  const std::span<const std::byte> all(bytes);
  // Pieces that start and end inside blocks, and across several blocks.
  for (const size_t piece : {size_t{1}, size_t{7}, size_t{64}, size_t{100}, size_t{1000}}) {
    BlockHasher hasher(64);
    for (size_t at = 0; at < all.size(); at += piece) hasher.update(all.subspan(at, std::min(piece, all.size() - at)));
    const BlockChecksums sums = hasher.finish();
    EXPECT_EQ(sums.whole, xxh64(all)) << piece;
    ASSERT_EQ(sums.blocks.size(), 16u) << piece;  // 15 of 64 bytes, one of 40
    for (size_t b = 0; b < 16; ++b) {
      EXPECT_EQ(sums.blocks[b], xxh64(all.subspan(b * 64, std::min<size_t>(64, all.size() - b * 64)))) << piece << " " << b;
    }
  }
  BlockHasher whole_only(0);
  whole_only.update(all);
  EXPECT_EQ(whole_only.finish(), (BlockChecksums{xxh64(all), {}}));
  EXPECT_EQ(block_count(1000, 64), 16u);
  EXPECT_EQ(block_count(1024, 64), 16u);
  EXPECT_EQ(block_count(1, 64), 1u);
}

TEST(CheckpointManifest, RefusesChunksThatDoNotTileTheirTensor) {
  Manifest overlap = two_chunk_manifest();
  overlap.tensors[0].chunks[1].box = Box({1, 0}, {2, 2});
  expect_refused(overlap, file_rule::kInvalidManifest, {"\"w\"", "chunk 1", "overlaps"});
  Manifest hole = two_chunk_manifest();
  hole.tensors[0].chunks.pop_back();
  expect_refused(hole, file_rule::kInvalidManifest, {"\"w\"", "4 of its 8"});
  Manifest outside = two_chunk_manifest();
  outside.tensors[0].chunks[1].box = Box({3, 0}, {2, 2});
  expect_refused(outside, file_rule::kInvalidManifest, {"chunk 1", "not inside"});
  Manifest twice = two_chunk_manifest();
  twice.tensors[1].chunks.push_back(twice.tensors[1].chunks[0]);
  expect_refused(twice, file_rule::kInvalidManifest, {"\"s\""});
}

TEST(CheckpointManifest, RefusesLengthsOffsetsAndFilesThatDisagree) {
  Manifest length = two_chunk_manifest();
  length.tensors[0].chunks[0].length = 15;
  expect_refused(length, file_rule::kInvalidManifest, {"chunk 0", "length 15"});
  Manifest past = two_chunk_manifest();
  past.tensors[0].chunks[1].offset = 190;
  expect_refused(past, file_rule::kInvalidManifest, {"chunk 1", "pass the end"});
  Manifest unlisted = two_chunk_manifest();
  unlisted.tensors[0].chunks[1].file = "other.safetensors";
  expect_refused(unlisted, file_rule::kInvalidManifest, {"not listed"});
  Manifest escape = two_chunk_manifest();
  escape.files[1].name = "../data-00001.safetensors";
  expect_refused(escape, file_rule::kInvalidManifest, {"leaves the folder"});
  Manifest names = two_chunk_manifest();
  names.tensors[2].name = "w";
  expect_refused(names, file_rule::kInvalidManifest, {"appears twice"});
}

TEST(CheckpointManifest, AnUnknownVersionIsRefusedByNumberAndAnEditByChecksum) {
  const std::string good = serialize_manifest(two_chunk_manifest());
  std::string newer = good;
  newer.replace(newer.find("\"version\":2"), 11, "\"version\":7");
  try {
    parse_manifest(newer, "m.json");
    ADD_FAILURE() << "accepted version 7";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), file_rule::kInvalidManifest);
    EXPECT_NE(std::string(e.what()).find("unknown checkpoint format version 7"), std::string::npos) << e.what();
  }
  for (const std::string version : {"0", "3", "-1", "2.5", "\"2\""}) {
    std::string other = good;
    other.replace(other.find("\"version\":2"), 11, "\"version\":" + version);
    try {
      parse_manifest(other, "m.json");
      ADD_FAILURE() << "accepted version " << version;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), file_rule::kInvalidManifest);
      EXPECT_NE(std::string(e.what()).find("unknown checkpoint format version " + version), std::string::npos) << e.what();
    }
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
