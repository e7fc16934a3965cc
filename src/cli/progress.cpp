#include "cli/progress.h"

#include <unistd.h>

#include <array>
#include <cstdio>

#include <fmt/format.h>

namespace reshard::cli {

Progress::Progress(std::string label, uint64_t total)
    : label_(std::move(label)), total_(total), enabled_(::isatty(STDERR_FILENO) == 1) {}

Progress::~Progress() { finish(); }

void Progress::finish() {
  if (!drawn_) return;
  draw();
  std::fputs("\n", stderr);
  drawn_ = false;
  enabled_ = false;
}

void Progress::advance(uint64_t bytes) {
  done_ += bytes;
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (drawn_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  draw();
}

void Progress::draw() {
  const double percent = total_ == 0 ? 100.0 : 100.0 * static_cast<double>(done_) / static_cast<double>(total_);
  std::fputs(fmt::format("\r{} {} / {} ({:.0f}%)\x1b[K", label_, human_bytes(done_), human_bytes(total_),
                         percent)
                 .c_str(),
             stderr);
  std::fflush(stderr);
  drawn_ = true;
}

std::string human_bytes(uint64_t bytes) {
  static constexpr std::array<const char*, 6> kUnits = {"kB", "MB", "GB", "TB", "PB", "EB"};
  if (bytes < 1000) return fmt::format("{} B", bytes);
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  for (value /= 1000; value >= 1000 && unit + 1 < kUnits.size(); value /= 1000) ++unit;
  return fmt::format("{:.2f} {}", value, kUnits[unit]);
}

}  // namespace reshard::cli
