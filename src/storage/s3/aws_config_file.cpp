#include "storage/s3/aws_config_file.h"

#include "storage/ascii_lower.h"

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

#include <fmt/format.h>

namespace reshard::storage_detail {
namespace {

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r')) text.remove_suffix(1);
  return text;
}

// "key = value" or "key: value" (configparser takes either), split at the first.
std::optional<std::pair<std::string, std::string>> key_value(std::string_view line) {
  const size_t at = line.find_first_of("=:");
  if (at == std::string_view::npos) return std::nullopt;
  const std::string_view key = trim(line.substr(0, at));
  if (key.empty()) return std::nullopt;
  return std::pair{ascii_lower(key), std::string(trim(line.substr(at + 1)))};
}

std::filesystem::path home() {
  if (const auto value = environment("HOME")) return *value;
  if (const passwd* entry = getpwuid(getuid()); entry != nullptr && entry->pw_dir != nullptr) return entry->pw_dir;
  return "/";
}

// "~/x" -> "$HOME/x", as botocore expands these paths.
std::filesystem::path expand_home(const std::string& path) {
  if (path == "~") return home();
  if (path.starts_with("~/")) return home() / path.substr(2);
  return path;
}

// Every section of the file; none when it cannot be read.
std::map<std::string, AwsProfile> read_ini(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::stringstream text;
  text << in.rdbuf();
  return parse_aws_ini(text.str());
}

}  // namespace

std::optional<std::string> AwsProfile::get(std::string_view key) const {
  const auto it = values.find(std::string(key));
  if (it == values.end() || it->second.empty()) return std::nullopt;
  return it->second;
}

std::optional<std::string> AwsProfile::get(std::string_view section, std::string_view key) const {
  const auto it = nested.find(std::string(section));
  if (it == nested.end()) return std::nullopt;
  const auto value = it->second.find(std::string(key));
  if (value == it->second.end() || value->second.empty()) return std::nullopt;
  return value->second;
}

std::map<std::string, AwsProfile> parse_aws_ini(std::string_view text) {
  std::map<std::string, AwsProfile> sections;
  AwsProfile* section = nullptr;
  std::string last_key;  // the key an indented line continues
  while (!text.empty()) {
    const size_t end = text.find('\n');
    const std::string_view raw = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    const std::string_view line = trim(raw);
    if (line.empty() || line.front() == '#' || line.front() == ';') continue;
    const bool indented = raw.front() == ' ' || raw.front() == '\t';
    if (indented && section != nullptr && !last_key.empty()) {
      // A continuation line: under "s3 =" it is a nested "key = value".
      if (section->values[last_key].empty()) {
        if (const auto pair = key_value(line)) section->nested[last_key][pair->first] = pair->second;
      }
      continue;
    }
    if (line.front() == '[') {
      const size_t close = line.find(']');
      section = close == std::string_view::npos ? nullptr : &sections[std::string(trim(line.substr(1, close - 1)))];
      last_key.clear();
      continue;
    }
    const auto pair = key_value(line);
    if (section == nullptr || !pair) continue;
    last_key = pair->first;
    section->values[pair->first] = pair->second;
    if (!pair->second.empty()) section->nested.erase(pair->first);
  }
  return sections;
}

std::optional<std::string> environment(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

AwsConfigPaths aws_config_paths() {
  AwsConfigPaths paths;
  const auto profile = environment("AWS_PROFILE");
  paths.profile = profile.value_or("default");
  paths.profile_from_environment = profile.has_value();
  paths.credentials_file = expand_home(environment("AWS_SHARED_CREDENTIALS_FILE").value_or("~/.aws/credentials"));
  paths.config_file = expand_home(environment("AWS_CONFIG_FILE").value_or("~/.aws/config"));
  return paths;
}

std::optional<AwsProfile> credentials_file_profile(const AwsConfigPaths& paths) {
  const std::map<std::string, AwsProfile> sections = read_ini(paths.credentials_file);
  const auto it = sections.find(paths.profile);
  if (it == sections.end()) return std::nullopt;
  return it->second;
}

std::optional<AwsProfile> config_file_profile(const AwsConfigPaths& paths) {
  const std::map<std::string, AwsProfile> sections = read_ini(paths.config_file);
  // "[profile NAME]", and for the default profile "[default]" as well.
  if (paths.profile == "default") {
    if (const auto it = sections.find("default"); it != sections.end()) return it->second;
  }
  const auto it = sections.find(fmt::format("profile {}", paths.profile));
  if (it == sections.end()) return std::nullopt;
  return it->second;
}

}  // namespace reshard::storage_detail
