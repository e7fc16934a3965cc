// A fresh folder under the system temp folder, removed with all in it when the test is done.
#pragma once

#include <filesystem>
#include <string_view>

namespace reshard::testing {

class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(std::string_view name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

}  // namespace reshard::testing
