#include "demo/demo_log.h"

#include <iostream>

#include <fmt/format.h>

namespace reshard::demo {
namespace {

double mb_per_s(uint64_t bytes, double seconds) { return seconds > 0 ? static_cast<double>(bytes) / 1e6 / seconds : 0; }

std::string time_text(double seconds) {
  return seconds < 1 ? fmt::format("{:.1f} ms", seconds * 1e3) : fmt::format("{:.2f} s", seconds);
}

// Indents every line of `text` by `spaces`.
std::string indented(const std::string& text, int spaces) {
  const std::string pad(static_cast<size_t>(spaces), ' ');
  std::string out = pad;
  for (size_t i = 0; i < text.size(); ++i) {
    out += text[i];
    if (text[i] == '\n' && i + 1 < text.size()) out += pad;
  }
  return out;
}

}  // namespace

std::string bytes_text(uint64_t bytes) {
  const auto b = static_cast<double>(bytes);
  if (bytes >= 1'000'000'000) return fmt::format("{:.2f} GB", b / 1e9);
  if (bytes >= 1'000'000) return fmt::format("{:.2f} MB", b / 1e6);
  if (bytes >= 1'000) return fmt::format("{:.1f} kB", b / 1e3);
  return fmt::format("{} B", bytes);
}

std::string rate_text(uint64_t bytes, double seconds) {
  if (seconds < 1e-6) return "-";
  return fmt::format("{:.0f} MB/s", mb_per_s(bytes, seconds));
}

DemoLog::DemoLog(bool speaks, bool json, int steps) : speaks_(speaks), json_(json), steps_(steps) {
  for (const char* key : {"model", "processes", "devices", "out"}) doc_[key] = nullptr;  // introduction first
  doc_["steps"] = nlohmann::ordered_json::array();
  doc_["checks"] = nlohmann::ordered_json::array();
}

void DemoLog::print(const std::string& text) const {
  if (!speaks_ || json_) return;
  std::cout << text << '\n';
  std::cout.flush();
}

void DemoLog::line(const std::string& text) { print(text); }

void DemoLog::field(const std::string& key, nlohmann::ordered_json value) { doc_[key] = std::move(value); }

void DemoLog::step(const std::string& key, const std::string& title, uint64_t bytes, double seconds) {
  ++step_;
  print(fmt::format("\n[{}/{}] {}: {} in {} ({})", step_, steps_, title, bytes_text(bytes), time_text(seconds),
                    rate_text(bytes, seconds)));
  doc_["steps"].push_back(
      {{"step", key}, {"bytes", bytes}, {"seconds", seconds}, {"mb_per_s", mb_per_s(bytes, seconds)}});
}

void DemoLog::detail(const std::string& text) { print(indented(text, 6)); }

void DemoLog::check(const std::string& key, const std::string& what, const std::string& where, const CheckTally& tally,
                    double seconds) {
  print(indented(fmt::format("check: {}: {} tensors equal the reference bit for bit{} ({} elements, {}; {}, {})", what,
                             tally.tensors, where, tally.elements, bytes_text(tally.bytes), time_text(seconds),
                             rate_text(tally.bytes, seconds)),
                 6));
  doc_["checks"].push_back({{"check", key},
                            {"tensors", tally.tensors},
                            {"elements", tally.elements},
                            {"bytes", tally.bytes},
                            {"mismatches", tally.mismatches},
                            {"seconds", seconds}});
}

void DemoLog::picture(const std::string& caption, const std::string& picture) {
  print(indented(caption, 6));
  print(indented(picture, 6));
}

void DemoLog::finish(const std::string& closing) {
  if (!speaks_) return;
  if (json_) {
    doc_["ok"] = true;
    std::cout << doc_.dump() << '\n';
    std::cout.flush();
    return;
  }
  print("\n" + closing);
}

}  // namespace reshard::demo
