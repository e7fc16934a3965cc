// A byte-count progress line on stderr, shown only when stderr is a terminal.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace reshard::cli {

class Progress {
 public:
  // `label` leads the line ("converting"); `total` is the number of bytes expected.
  Progress(std::string label, uint64_t total);
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  // Calls finish().
  ~Progress();

  // Counts `bytes` more done; redraws at most ten times a second.
  void advance(uint64_t bytes);
  // Draws the last state and ends the line, if a line was drawn; call it
  // before printing anything else. Idempotent.
  void finish();

 private:
  void draw();

  std::string label_;
  uint64_t total_ = 0;
  uint64_t done_ = 0;
  bool enabled_ = false;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point last_draw_;
};

// "1.50 GB", "512 B": decimal units, as --max-shard-size reads them.
std::string human_bytes(uint64_t bytes);

}  // namespace reshard::cli
