// Fuzzes the Hugging Face index reader: any input must end in a typed error or
// an index naming only files of its own folder, which survives a rewrite.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_check.h"
#include "reshard/formats/hf_index.h"
#include "reshard/layout/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using reshard::fuzz::check;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  reshard::HfIndex index;
  try {
    index = reshard::parse_hf_index(text, "fuzz.index.json");
  } catch (const reshard::Error&) {
    return 0;  // a typed rejection is the right answer to bad input
  }
  for (const auto& [tensor, file] : index.weight_map) {
    try {
      reshard::check_shard_file_name(file, tensor, "fuzz.index.json");
    } catch (const reshard::Error&) {
      check(false, "an accepted index names only files of its own folder");
    }
  }
  const reshard::HfIndex again = reshard::parse_hf_index(reshard::hf_index_json(index), "rewritten");
  check(again.weight_map == index.weight_map, "the weight map survives a rewrite");
  check(again.total_size == index.total_size, "total_size survives a rewrite");
  check(again.total_parameters == index.total_parameters, "total_parameters survives a rewrite");
  return 0;
}
