#include "storage/support/object_listing.h"

#include <fstream>
#include <memory>
#include <sstream>

#include "reshard/storage/open_store.h"

namespace reshard::testing {

std::map<std::string, std::string> objects_under(const storage::Location& prefix) {
  const std::shared_ptr<storage::Store> store = storage::open_store(prefix);
  std::map<std::string, std::string> objects;
  for (const storage::ListEntry& entry : store->list(prefix)) {
    objects[entry.name] = store->read_all(prefix.child(entry.name), entry.size);
  }
  return objects;
}

std::map<std::string, std::string> files_under(const std::filesystem::path& folder) {
  std::map<std::string, std::string> files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(folder)) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::ostringstream bytes;
    bytes << in.rdbuf();
    files[std::filesystem::relative(entry.path(), folder).generic_string()] = bytes.str();
  }
  return files;
}

}  // namespace reshard::testing
