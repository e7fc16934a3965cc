// Helpers for the LoRA and PEFT tests: scratch folders and file text.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace reshard::testing {

// A fresh folder under the system temp folder, removed with everything in it.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

std::string read_text(const std::filesystem::path& path);
void write_text(const std::filesystem::path& path, std::string_view text);

}  // namespace reshard::testing
