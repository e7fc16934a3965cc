// What the demo tells the user: each step as it ends (sizes, time,
// throughput), its checks and layout pictures; or, with --json, one document
// at the end. Only the process that speaks (rank 0) prints.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "demo/demo_check.h"

namespace reshard::demo {

class DemoLog {
 public:
  DemoLog(bool speaks, bool json, int steps);

  bool speaks() const { return speaks_; }

  // A line of the introduction (text mode), and a field of the JSON document.
  void line(const std::string& text);
  void field(const std::string& key, nlohmann::ordered_json value);

  // A step that moved `bytes` in `seconds`: "[2/6] save the checkpoint ...: 1.2 MB in 3.1 ms (387 MB/s)".
  void step(const std::string& key, const std::string& title, uint64_t bytes, double seconds);
  // A detail under the last step (text mode only).
  void detail(const std::string& text);
  // A check that passed (one that failed throws before it is logged);
  // `where` says which copies were compared ("on every device").
  void check(const std::string& key, const std::string& what, const std::string& where, const CheckTally& tally,
             double seconds);
  // A layout picture under the last step, with its caption.
  void picture(const std::string& caption, const std::string& picture);

  // Prints the JSON document (json mode) or the closing line.
  void finish(const std::string& closing);

 private:
  void print(const std::string& text) const;

  bool speaks_;
  bool json_;
  int steps_;
  int step_ = 0;
  nlohmann::ordered_json doc_;
};

// "1.18 MB", "912 kB", "64 B" (decimal units, as --max-shard-size reads them).
std::string bytes_text(uint64_t bytes);
// "387 MB/s"; "-" when the time is too short to measure.
std::string rate_text(uint64_t bytes, double seconds);

}  // namespace reshard::demo
