// Name patterns of map rules ("model.layers.{layer}.{proj}.weight") and the
// "rearrange" axis expressions ("layer (heads head_dim) embed -> ...").
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "reshard/pipelines/tensor_map.h"

namespace reshard::pipelines_detail {

// A pattern: literal text and {placeholder}s, in order.
struct NamePattern {
  struct Part {
    bool placeholder = false;
    std::string text;  // the literal, or the placeholder's name
  };
  std::vector<Part> parts;

  std::vector<std::string> placeholders() const;
};

using Captures = std::map<std::string, std::string>;

// Parses `text`; Error(kParse) naming `what` for an unclosed or empty brace, a
// repeated placeholder, or two placeholders with nothing between them.
NamePattern parse_name_pattern(std::string_view text, std::string_view what);

// Whether `name` matches: literals exactly, each placeholder one or more
// characters other than '.', the placeholder `digits` (if set) a decimal index
// without leading zeros. Fills `captures` on success.
bool match_name(const NamePattern& pattern, std::string_view name, const std::optional<std::string>& digits,
                Captures& captures);

// The pattern with every placeholder replaced by its value in `values`.
std::string fill_name(const NamePattern& pattern, const Captures& values);

// "a (b c) d -> (b c a) d": the two sides. Error(kParse) naming `what`.
std::pair<AxisGroups, AxisGroups> parse_rearrange(std::string_view text, std::string_view what);

// The sides written back as text.
std::string rearrange_text(const AxisGroups& from, const AxisGroups& to);

}  // namespace reshard::pipelines_detail
