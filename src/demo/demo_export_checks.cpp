#include "demo/demo_export_checks.h"

#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "demo/demo_files.h"
#include "demo/demo_reference.h"
#include "reshard/layout/error.h"
#include "reshard/pipelines/lora_config.h"

namespace reshard::demo {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

// The folder's tensor names against the reference's (rank 0 alone, so that each difference counts once).
void check_names(const StoredFolder& stored, const std::vector<HfTensor>& expected, CheckTally& tally) {
  std::set<std::string> want;
  for (const HfTensor& t : expected) want.insert(t.name);
  // Named copies, not structured bindings: clang 14 cannot capture those in a lambda.
  for (const auto& entry : stored.tensors) {
    const std::string& name = entry.first;
    if (!want.contains(name)) tally.fail([&] { return fmt::format("tensor {} is not one the reference has", name); });
  }
  for (const std::string& name : want) {
    if (!stored.tensors.contains(name)) {
      tally.fail([&] { return fmt::format("tensor {} is missing", name); });
    }
  }
  for (const auto& entry : stored.metadata) {
    const auto& file = entry.first;
    const auto& metadata = entry.second;
    if (Json::parse(metadata) != Json{{"format", "pt"}}) {
      tally.fail([&] {
        return fmt::format("{} has metadata {} where Hugging Face writes {{\"format\":\"pt\"}}",
                           file.filename().string(), metadata);
      });
    }
  }
}

// This process's share of the tensors (every size-th), each read and compared.
void check_tensors(DemoContext& ctx, const StoredFolder& stored, const std::vector<HfTensor>& expected,
                   std::string_view flip, CheckTally& tally) {
  const auto rank = static_cast<size_t>(ctx.transport.rank());
  const auto size = static_cast<size_t>(ctx.transport.size());
  // --self-test-flip corrupts a merged weight where there is one: the values the merge computed.
  bool any_merged = false;
  for (const HfTensor& t : expected) any_merged = any_merged || t.merged;
  bool flipped = false;
  for (size_t i = rank; i < expected.size(); i += size) {
    const HfTensor& t = expected[i];
    const auto it = stored.tensors.find(t.name);
    if (it == stored.tensors.end()) continue;  // check_names reports it
    std::string bytes = read_stored_bytes(it->second);
    if (ctx.flips(flip) && !flipped && !bytes.empty() && t.merged == any_merged) {
      bytes[0] = static_cast<char>(bytes[0] ^ 1);
      flipped = true;
    }
    check_stored(
        t.name, t.dtype, t.shape, it->second.dtype, it->second.shape, bytes,
        [&](uint64_t flat) { return hf_element_bits(ctx.model, t, flat); }, tally);
  }
}

template <typename T>
void expect_field(const Json& config, const char* key, const T& want, CheckTally& tally) {
  if (!config.contains(key) || config[key] != Json(want)) {
    tally.fail([&] {
      return fmt::format("adapter_config.json: \"{}\" is {} where PEFT expects {}", key,
                         config.contains(key) ? config[key].dump() : "absent", Json(want).dump());
    });
  }
}

void check_adapter_config(const DemoModel& model, const std::string& text, CheckTally& tally) {
  Json config;
  try {
    config = Json::parse(text);
  } catch (const Json::exception& e) {
    tally.fail([&] { return fmt::format("adapter_config.json is not JSON: {}", e.what()); });
    return;
  }
  const LoraConfig lora = demo_lora_config(model);
  expect_field(config, "peft_type", "LORA", tally);
  expect_field(config, "task_type", "CAUSAL_LM", tally);
  expect_field(config, "r", model.sizes.rank, tally);
  if (!config.contains("lora_alpha") || !config["lora_alpha"].is_number() ||
      config["lora_alpha"].get<double>() != model.sizes.alpha) {
    tally.fail([&] { return fmt::format("adapter_config.json: \"lora_alpha\" is not {}", model.sizes.alpha); });
  }
  if (!config.contains("lora_dropout") || !config["lora_dropout"].is_number() ||
      config["lora_dropout"].get<double>() != 0.0) {
    tally.fail([&] { return std::string("adapter_config.json: \"lora_dropout\" is not 0"); });
  }
  expect_field(config, "target_modules", lora.target_modules, tally);
  expect_field(config, "bias", "none", tally);
  expect_field(config, "fan_in_fan_out", false, tally);
  expect_field(config, "use_rslora", false, tally);
  expect_field(config, "inference_mode", true, tally);
  expect_field(config, "base_model_name_or_path", *lora.base_model_name_or_path, tally);
  expect_field(config, "modules_to_save", nullptr, tally);
  expect_field(config, "rank_pattern", Json::object(), tally);
  expect_field(config, "alpha_pattern", Json::object(), tally);
  // json.dumps(config, indent=2, sort_keys=True): nlohmann's objects are sorted too.
  if (config.dump(2) != text) {
    tally.fail([&] {
      return std::string(
          "adapter_config.json is not written as PEFT writes it (sorted keys, "
          "two-space indent, no newline at the end)");
    });
  }
}

void check_hf_config(const DemoModel& model, const fs::path& path, CheckTally& tally) {
  std::string text;
  try {
    text = read_text_file(path);
  } catch (const Error& e) {
    tally.fail([&] { return std::string(e.what()); });
    return;
  }
  const Json want = Json::parse(hf_config_json(model));
  const Json got = Json::parse(text, nullptr, false);
  if (got != want) {
    tally.fail(
        [&] { return fmt::format("{} is {} where the model's config is {}", path.string(), got.dump(), want.dump()); });
  }
}

}  // namespace

CheckTally check_adapter_folder(DemoContext& ctx, const fs::path& folder, std::string_view flip) {
  const std::vector<HfTensor> expected = hf_adapter_tensors(ctx.model);
  CheckTally local;
  const StoredFolder stored =
      read_stored_folder(folder, "adapter_model.safetensors", "adapter_model.safetensors.index.json");
  if (ctx.transport.rank() == 0) {
    check_names(stored, expected, local);
    std::string text;
    try {
      text = read_text_file(folder / "adapter_config.json");
      check_adapter_config(ctx.model, text, local);
    } catch (const Error& e) {
      local.fail([&] { return std::string(e.what()); });
    }
  }
  check_tensors(ctx, stored, expected, flip, local);
  return agree_on_check(local, ctx.transport, fmt::format("the PEFT adapter {}", folder.string()));
}

CheckTally check_model_folder(DemoContext& ctx, const fs::path& folder, bool merged, std::string_view flip) {
  const std::vector<HfTensor> expected = hf_model_tensors(ctx.model, merged);
  CheckTally local;
  const StoredFolder stored = read_stored_folder(folder, "model.safetensors", "model.safetensors.index.json");
  if (ctx.transport.rank() == 0) {
    check_names(stored, expected, local);
    check_hf_config(ctx.model, folder / "config.json", local);
  }
  check_tensors(ctx, stored, expected, flip, local);
  return agree_on_check(local, ctx.transport, fmt::format("the {}model {}", merged ? "merged " : "", folder.string()));
}

}  // namespace reshard::demo
