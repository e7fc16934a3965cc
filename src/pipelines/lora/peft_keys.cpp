#include "pipelines/lora/peft_keys.h"

#include <utility>

#include "reshard/pipelines/peft_adapter.h"

namespace reshard::pipelines_detail {
namespace {

struct Suffix {
  std::string_view text;
  PeftKey::Kind kind;
  bool embedding;
};

constexpr Suffix kSuffixes[] = {
    {".lora_A.weight", PeftKey::Kind::kA, false},
    {".lora_B.weight", PeftKey::Kind::kB, false},
    {".lora_B.bias", PeftKey::Kind::kBBias, false},
    {".lora_embedding_A", PeftKey::Kind::kA, true},
    {".lora_embedding_B", PeftKey::Kind::kB, true},
    {".lora_magnitude_vector", PeftKey::Kind::kMagnitude, false},
};

// "<module>.<marker>.<param>" (with modules_to_save also an adapter name
// between) to {"<module>", "<param>"}, or nullopt.
std::optional<std::pair<std::string, std::string>> split_marker(std::string_view rest, std::string_view marker,
                                                                bool skip_adapter_name) {
  const size_t at = rest.find(marker);
  if (at == std::string_view::npos || at == 0) return std::nullopt;
  std::string_view param = rest.substr(at + marker.size());
  if (skip_adapter_name) {
    const size_t dot = param.find('.');
    if (dot == std::string_view::npos) return std::nullopt;
    param.remove_prefix(dot + 1);
  }
  if (param.empty()) return std::nullopt;
  return std::pair{std::string(rest.substr(0, at)), std::string(param)};
}

}  // namespace

std::optional<PeftKey> parse_peft_key(std::string_view key) {
  if (!key.starts_with(kPeftKeyPrefix)) return std::nullopt;
  std::string_view rest = key.substr(kPeftKeyPrefix.size());
  if (rest.empty()) return std::nullopt;
  for (const Suffix& suffix : kSuffixes) {
    if (rest.size() > suffix.text.size() && rest.ends_with(suffix.text)) {
      PeftKey parsed;
      parsed.kind = suffix.kind;
      parsed.embedding = suffix.embedding;
      parsed.module = std::string(rest.substr(0, rest.size() - suffix.text.size()));
      return parsed;
    }
  }
  PeftKey whole;
  whole.kind = PeftKey::Kind::kWhole;
  if (auto saved = split_marker(rest, ".modules_to_save.", true)) {
    whole.module = saved->first;
    whole.tensor = saved->first + "." + saved->second;
  } else if (auto base = split_marker(rest, ".base_layer.", false)) {
    whole.module = base->first;
    whole.tensor = base->first + "." + base->second;
    whole.base_layer = true;
  } else {
    whole.tensor = std::string(rest);
    const size_t dot = rest.rfind('.');
    whole.module = dot == std::string_view::npos ? std::string() : std::string(rest.substr(0, dot));
  }
  return whole;
}

}  // namespace reshard::pipelines_detail
