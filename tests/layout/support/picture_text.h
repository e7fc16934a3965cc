// Reading draw_sharding's pictures back in tests: colour codes removed, lines
// measured in columns, the device labels of the blocks collected.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace reshard::testing {

// The text without its ANSI colour codes ("\x1b[...m").
std::string without_colour(const std::string& text);

// Every run of decimal digits in `text`, as numbers.
std::vector<int64_t> numbers_in(const std::string& text);

// The lines, colour codes removed (no trailing empty line).
std::vector<std::string> lines_of(const std::string& text);

// A line's width in columns: box-drawing characters are three bytes but one column.
size_t columns(const std::string& line);

// Every number written inside the blocks (lines that start with a border "│"):
// the devices' labels, without the caption and the grids' headings.
std::multiset<int64_t> labelled_numbers(const std::string& text);

// How many times `word` occurs in `text` (blocks: the platform word of each label).
size_t count_of(const std::string& text, const std::string& word);

}  // namespace reshard::testing
