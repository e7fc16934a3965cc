#include "cli/upload_flags.h"

#include <algorithm>

#include <fmt/format.h>

#include "reshard/layout/parse.h"

namespace reshard::cli {

void add_upload_flags(CLI::App& command, UploadFlags& flags, std::string_view destination) {
  command.add_option("--part-size", flags.part_size,
                     fmt::format("{} in an object store: each file is uploaded in parts of this size (S3: 5MiB to "
                                 "5GiB; default 64MiB, larger where a file would have more than 10,000 parts)",
                                 destination));
  command
      .add_option("--parts-in-flight", flags.parts_in_flight,
                  fmt::format("{} in an object store: parts each process uploads at once (memory: about this many "
                              "parts)",
                              destination))
      ->capture_default_str();
}

storage::UploadOptions upload_options(const UploadFlags& flags) {
  storage::UploadOptions options;
  if (!flags.part_size.empty()) options.part_bytes = parse_byte_size(flags.part_size);
  options.parts_in_flight = std::max<uint32_t>(flags.parts_in_flight, 1);
  return options;
}

}  // namespace reshard::cli
