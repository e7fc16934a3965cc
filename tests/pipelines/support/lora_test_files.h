// Helpers for the LoRA and PEFT tests: scratch folders and file text.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "support/temp_dir.h"

namespace reshard::testing {

std::string read_text(const std::filesystem::path& path);
void write_text(const std::filesystem::path& path, std::string_view text);

}  // namespace reshard::testing
