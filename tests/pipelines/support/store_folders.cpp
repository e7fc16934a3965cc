#include "pipelines/support/store_folders.h"

#include <fstream>
#include <sstream>

#include "reshard/storage/open_store.h"
#include "storage/support/store_servers.h"

namespace reshard::testing {

namespace fs = std::filesystem;

storage::Location fresh_memory_folder(std::string_view bucket) {
  return storage::Location::parse("memory://" + std::string(bucket) + "/" + unique_prefix());
}

void upload_folder(const fs::path& folder, const storage::Location& prefix) {
  const auto store = storage::open_store(prefix);
  for (const auto& entry : fs::recursive_directory_iterator(folder)) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::ostringstream bytes;
    bytes << in.rdbuf();
    store->write_all(prefix.child(fs::relative(entry.path(), folder).generic_string()), bytes.str(),
                     storage::IfExists::kFail);
  }
}

size_t pending_uploads(const storage::Location& prefix, std::span<const std::string> names) {
  const auto store = storage::open_store(prefix);
  size_t pending = 0;
  for (const std::string& name : names) pending += store->abort_stale_uploads(prefix.child(name));
  return pending;
}

}  // namespace reshard::testing
