// The regular expressions of PEFT's rank_pattern and alpha_pattern keys: the
// part of Python's `re` syntax such keys use, matched without std::regex
// (whose libstdc++ headers trip the sanitizer build's warnings).
#pragma once

#include <string_view>

namespace reshard::pipelines_detail {

// Whether all of `text` matches `pattern`. Supported: literals, '.', escapes
// (\. \d \w \s \D \W \S and escaped punctuation), classes [a-z_] and [^...],
// groups (...) and (?:...), '|', the greedy quantifiers * + ? {m} {m,} {m,n},
// and ^ / $ (at the start / end of the text). Anything else, or a match that
// would take too many steps, is Error(kParse) naming the pattern.
bool regex_full_match(std::string_view pattern, std::string_view text);

}  // namespace reshard::pipelines_detail
