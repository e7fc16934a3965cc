#include "pipelines/lora/lora_pattern.h"

#include <cctype>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "reshard/layout/error.h"

namespace reshard::pipelines_detail {
namespace {

constexpr int kUnbounded = -1;
constexpr long kMaxSteps = 1'000'000;

struct Alternatives;

// One atom and how often it may repeat.
struct Node {
  enum class Kind { kChar, kAny, kClass, kGroup, kStart, kEnd };
  Kind kind = Kind::kChar;
  char c = 0;
  std::vector<std::pair<char, char>> ranges;  // for kClass
  bool negated = false;
  std::shared_ptr<Alternatives> group;
  int min = 1;
  int max = 1;
};

using Sequence = std::vector<Node>;
struct Alternatives {
  std::vector<Sequence> options;
};

class Parser {
 public:
  explicit Parser(std::string_view pattern) : pattern_(pattern) {}

  Alternatives parse() {
    Alternatives all = alternatives();
    if (at_ < pattern_.size()) fail("unbalanced ')'");
    return all;
  }

 private:
  [[noreturn]] void fail(std::string_view why) const {
    throw Error(ErrorCode::kParse,
                fmt::format("pattern '{}' is not a supported regular expression: {} at {}", pattern_, why, at_));
  }
  bool done() const { return at_ >= pattern_.size(); }
  char peek() const { return pattern_[at_]; }

  Alternatives alternatives() {
    Alternatives all;
    all.options.push_back(sequence());
    while (!done() && peek() == '|') {
      ++at_;
      all.options.push_back(sequence());
    }
    return all;
  }

  Sequence sequence() {
    Sequence seq;
    while (!done() && peek() != '|' && peek() != ')') {
      Node node = atom();
      quantifier(node);
      seq.push_back(std::move(node));
    }
    return seq;
  }

  static void add_escape_class(Node& node, char e) {
    const char lower = static_cast<char>(std::tolower(static_cast<unsigned char>(e)));
    if (lower == 'd') node.ranges = {{'0', '9'}};
    if (lower == 'w') node.ranges = {{'a', 'z'}, {'A', 'Z'}, {'0', '9'}, {'_', '_'}};
    if (lower == 's') node.ranges = {{' ', ' '}, {'\t', '\r'}};
    node.negated = e != lower;
  }

  Node escape() {
    if (done()) fail("a trailing '\\'");
    const char e = pattern_[at_++];
    Node node;
    if (std::string_view("dwsDWS").find(e) != std::string_view::npos) {
      node.kind = Node::Kind::kClass;
      add_escape_class(node, e);
    } else if (std::isalnum(static_cast<unsigned char>(e))) {
      fail(fmt::format("the escape '\\{}'", e));
    } else {
      node.c = e;
    }
    return node;
  }

  Node char_class() {
    Node node;
    node.kind = Node::Kind::kClass;
    if (!done() && peek() == '^') {
      node.negated = true;
      ++at_;
    }
    bool first = true;
    while (!done() && (peek() != ']' || first)) {
      char lo = pattern_[at_++];
      if (lo == '\\') {
        if (done()) fail("a trailing '\\'");
        lo = pattern_[at_++];
        if (std::isalnum(static_cast<unsigned char>(lo))) fail("an escape inside [...]");
      }
      char hi = lo;
      if (at_ + 1 < pattern_.size() && peek() == '-' && pattern_[at_ + 1] != ']') {
        hi = pattern_[at_ + 1];
        at_ += 2;
      }
      node.ranges.emplace_back(lo, hi);
      first = false;
    }
    if (done()) fail("'[' without ']'");
    ++at_;
    return node;
  }

  Node atom() {
    const char c = pattern_[at_++];
    Node node;
    switch (c) {
      case '.': node.kind = Node::Kind::kAny; return node;
      case '^': node.kind = Node::Kind::kStart; return node;
      case '$': node.kind = Node::Kind::kEnd; return node;
      case '\\': return escape();
      case '[': return char_class();
      case '(': {
        if (pattern_.substr(at_, 2) == "?:") {
          at_ += 2;
        } else if (!done() && peek() == '?') {
          fail("'(?' extensions");
        }
        node.kind = Node::Kind::kGroup;
        node.group = std::make_shared<Alternatives>(alternatives());
        if (done() || peek() != ')') fail("'(' without ')'");
        ++at_;
        return node;
      }
      case '*': case '+': case '?': case '{': fail(fmt::format("'{}' with nothing to repeat", c));
      default: node.c = c; return node;
    }
  }

  int number() {
    int value = 0;
    bool any = false;
    while (!done() && std::isdigit(static_cast<unsigned char>(peek())) && value < 100000) {
      value = value * 10 + (pattern_[at_++] - '0');
      any = true;
    }
    return any ? value : kUnbounded;
  }

  void quantifier(Node& node) {
    if (done()) return;
    const char c = peek();
    if (c == '*' || c == '+' || c == '?') {
      ++at_;
      node.min = c == '+' ? 1 : 0;
      node.max = c == '?' ? 1 : kUnbounded;
    } else if (c == '{') {
      ++at_;
      node.min = number();
      if (node.min == kUnbounded) fail("'{' without a count");
      node.max = node.min;
      if (!done() && peek() == ',') {
        ++at_;
        node.max = number();
      }
      if (done() || peek() != '}') fail("'{' without '}'");
      ++at_;
      if (node.max != kUnbounded && node.max < node.min) fail("a count range backwards");
    } else {
      return;
    }
    if (!done() && (peek() == '?' || peek() == '+')) fail("lazy or possessive quantifiers");
  }

  std::string_view pattern_;
  size_t at_ = 0;
};

class Matcher {
 public:
  Matcher(std::string_view pattern, std::string_view text) : pattern_(pattern), text_(text) {}

  bool full(const Alternatives& all) {
    return alternatives(all, 0, [&](size_t end) { return end == text_.size(); });
  }

 private:
  using Next = std::function<bool(size_t)>;

  void step() {
    if (++steps_ > kMaxSteps) {
      throw Error(ErrorCode::kParse, fmt::format("pattern '{}': matching '{}' takes too long", pattern_, text_));
    }
  }

  bool alternatives(const Alternatives& all, size_t at, const Next& next) {
    for (const Sequence& seq : all.options) {
      if (sequence(seq, 0, at, next)) return true;
    }
    return false;
  }

  bool sequence(const Sequence& seq, size_t index, size_t at, const Next& next) {
    step();
    if (index == seq.size()) return next(at);
    return repeat(seq[index], 0, at, [&](size_t end) { return sequence(seq, index + 1, end, next); });
  }

  // Greedy: as many repetitions of `node` as possible, then fewer.
  bool repeat(const Node& node, int done, size_t at, const Next& next) {
    step();
    if (node.max == kUnbounded || done < node.max) {
      const bool more = once(node, at, [&](size_t end) {
        return (end != at || node.max != kUnbounded) && repeat(node, done + 1, end, next);
      });
      if (more) return true;
    }
    return done >= node.min && next(at);
  }

  bool once(const Node& node, size_t at, const Next& next) {
    switch (node.kind) {
      case Node::Kind::kStart: return at == 0 && next(at);
      case Node::Kind::kEnd: return at == text_.size() && next(at);
      case Node::Kind::kGroup: return alternatives(*node.group, at, next);
      default: break;
    }
    if (at >= text_.size()) return false;
    const char c = text_[at];
    bool ok = false;
    if (node.kind == Node::Kind::kAny) {
      ok = c != '\n';
    } else if (node.kind == Node::Kind::kChar) {
      ok = c == node.c;
    } else {
      for (const auto& [lo, hi] : node.ranges) ok = ok || (c >= lo && c <= hi);
      ok = ok != node.negated;
    }
    return ok && next(at + 1);
  }

  std::string_view pattern_;
  std::string_view text_;
  long steps_ = 0;
};

}  // namespace

bool regex_full_match(std::string_view pattern, std::string_view text) {
  const Alternatives all = Parser(pattern).parse();
  return Matcher(pattern, text).full(all);
}

}  // namespace reshard::pipelines_detail
