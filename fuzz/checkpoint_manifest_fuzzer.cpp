// Fuzzes the checkpoint manifest reader: any input must end in a typed error
// or a manifest whose chunks tile their tensors inside their files, and which
// survives a rewrite (block checksums included). An input that is JSON is
// also tried as the body of a manifest of each version with the right checksum, so mutations reach the validation behind it.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "formats/checksum.h"
#include "fuzz_check.h"
#include "reshard/formats/checkpoint_manifest.h"
#include "reshard/layout/error.h"

namespace {

using reshard::formats_detail::checksum_hex;
using reshard::formats_detail::xxh64;
using reshard::fuzz::check;
namespace ckpt = reshard::checkpoint;

void check_accepted(const ckpt::Manifest& manifest) {
  for (const ckpt::TensorEntry& tensor : manifest.tensors) {
    int64_t covered = 0;
    for (const ckpt::Chunk& chunk : tensor.chunks) {
      check(reshard::Box::whole(tensor.shape).contains(chunk.box), "a chunk lies inside its tensor");
      check(chunk.length == ckpt::dense_bytes(tensor.dtype, chunk.box.shape()), "a chunk's length is its box's size");
      covered += chunk.box.volume();
      bool listed = false;
      for (const ckpt::DataFile& file : manifest.files) {
        listed = listed || (file.name == chunk.file && chunk.offset + chunk.length <= file.size);
      }
      check(listed, "a chunk lies inside a listed file");
      const uint64_t blocks = manifest.block_bytes == 0 ? 0 : ckpt::block_count(chunk.length, manifest.block_bytes);
      check(chunk.blocks.size() == blocks, "a chunk has one checksum per block");
    }
    check(covered == reshard::Box::whole(tensor.shape).volume(), "chunks cover their tensor");
  }
  const ckpt::Manifest again = ckpt::parse_manifest(ckpt::serialize_manifest(manifest), "rewritten");
  check(again == manifest, "a manifest survives a rewrite");
}

void try_parse(std::string_view text) {
  try {
    check_accepted(ckpt::parse_manifest(text, "fuzz/manifest.json"));
  } catch (const reshard::Error&) {
    // a typed rejection is the right answer to bad input
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try_parse(text);
  const nlohmann::ordered_json body = nlohmann::ordered_json::parse(text, nullptr, false);
  if (body.is_discarded() || !body.is_object()) return 0;
  // As the body of every version this build reads.
  for (int64_t version = ckpt::kOldestFormatVersion; version <= ckpt::kFormatVersion; ++version) {
    const nlohmann::ordered_json file = {{"format", ckpt::kFormatName},
                                         {"version", version},
                                         {"checksum", "xxh64:" + checksum_hex(xxh64(body.dump()))},
                                         {"manifest", body}};
    try_parse(file.dump());
  }
  return 0;
}
