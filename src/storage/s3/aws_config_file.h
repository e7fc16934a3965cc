// The AWS shared configuration files (~/.aws/credentials and ~/.aws/config),
// read as botocore reads them: INI sections, keys lower-cased, '#' and ';'
// comment lines, and nested sub-sections ("s3 =" followed by indented
// "key = value" lines). Only read, never written.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace reshard::storage_detail {

// One profile's settings: plain keys, and the nested sub-sections by name.
struct AwsProfile {
  std::map<std::string, std::string> values;
  std::map<std::string, std::map<std::string, std::string>> nested;

  // The value of `key`, if set and not empty.
  std::optional<std::string> get(std::string_view key) const;
  // The value of `key` in nested sub-section `section` ("s3"), if set and not empty.
  std::optional<std::string> get(std::string_view section, std::string_view key) const;
};

// Every section of an INI text, by its name as written between the brackets.
std::map<std::string, AwsProfile> parse_aws_ini(std::string_view text);

// The profile chosen (AWS_PROFILE, else "default") and the two files' paths
// (AWS_SHARED_CREDENTIALS_FILE and AWS_CONFIG_FILE override ~/.aws/...).
struct AwsConfigPaths {
  std::string profile;
  std::filesystem::path credentials_file;
  std::filesystem::path config_file;
  bool profile_from_environment = false;  // AWS_PROFILE named it
};
AwsConfigPaths aws_config_paths();

// The chosen profile's section of each file: "[NAME]" in the credentials file,
// "[profile NAME]" (or "[default]") in the config file. nullopt when the file
// or the section is not there.
std::optional<AwsProfile> credentials_file_profile(const AwsConfigPaths& paths);
std::optional<AwsProfile> config_file_profile(const AwsConfigPaths& paths);

// A variable of the environment, nullopt when unset or empty.
std::optional<std::string> environment(const char* name);

}  // namespace reshard::storage_detail
