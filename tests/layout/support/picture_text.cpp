#include "picture_text.h"

#include <cctype>

namespace reshard::testing {

std::string without_colour(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text.compare(i, 2, "\x1b[") == 0) {
      i = text.find('m', i);
      if (i == std::string::npos) break;
    } else {
      out += text[i];
    }
  }
  return out;
}

std::vector<int64_t> numbers_in(const std::string& text) {
  std::vector<int64_t> out;
  for (size_t i = 0; i < text.size();) {
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]))) ++end;
    out.push_back(std::stoll(text.substr(i, end - i)));
    i = end;
  }
  return out;
}

std::vector<std::string> lines_of(const std::string& text) {
  const std::string plain = without_colour(text);
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t end = plain.find('\n'); end != std::string::npos; end = plain.find('\n', start)) {
    out.push_back(plain.substr(start, end - start));
    start = end + 1;
  }
  if (start < plain.size()) out.push_back(plain.substr(start));
  return out;
}

size_t columns(const std::string& line) {
  size_t n = 0;
  for (char c : line) {
    if ((static_cast<unsigned char>(c) & 0xc0) != 0x80) ++n;  // count the lead byte of each UTF-8 character only
  }
  return n;
}

std::multiset<int64_t> labelled_numbers(const std::string& text) {
  std::multiset<int64_t> out;
  for (const std::string& line : lines_of(text)) {
    if (line.rfind("│", 0) != 0) continue;
    for (int64_t n : numbers_in(line)) out.insert(n);
  }
  return out;
}

size_t count_of(const std::string& text, const std::string& word) {
  size_t n = 0;
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) ++n;
  return n;
}

}  // namespace reshard::testing
