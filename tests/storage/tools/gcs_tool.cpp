// reshard's GCS driver as a command, for gcs_vs_google_cloud_storage.py,
// which checks it against Google's own client (google-cloud-storage). The
// endpoint comes from the environment (STORAGE_EMULATOR_HOST), as for users.
//   gcs_tool put gs://B/K FILE PART_BYTES WRITERS   parallel upload (IfExists::kFail)
//   gcs_tool write gs://B/K FILE                    write_all (IfExists::kFail)
//   gcs_tool get gs://B/K FILE                      read_all into FILE
//   gcs_tool ranges gs://B/K FILE                   reads FILE's size in 10 kB ranges into FILE
//   gcs_tool list gs://B/PREFIX                     one JSON line: [[name, size], ...]
// Errors go to stderr as "KIND: message", with exit status 1.
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "reshard/layout/error.h"
#include "reshard/storage/open_store.h"

namespace {

using namespace reshard::storage;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

void put(Store& store, const Location& object, const std::string& bytes, uint64_t part_bytes, unsigned writers) {
  const PartLayout layout = PartLayout::plan(bytes.size(), part_bytes, store.part_rules());
  const std::unique_ptr<ParallelUpload> upload = store.start_upload(object, layout, IfExists::kFail);
  std::vector<std::vector<PartReceipt>> receipts(writers);
  std::vector<std::thread> threads;
  for (unsigned w = 0; w < writers; ++w) {
    threads.emplace_back([&, w] {
      const auto joined = store.join_upload(object, layout, upload->handle());
      for (uint32_t part = w; part < layout.count(); part += writers) {
        const std::string_view piece = std::string_view(bytes).substr(layout.offset(part), layout.size(part));
        receipts[w].push_back(joined->write_part(part, std::as_bytes(std::span(piece))));
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  std::vector<PartReceipt> all;
  for (const auto& some : receipts) all.insert(all.end(), some.begin(), some.end());
  upload->complete(all);
}

int run(const std::vector<std::string>& args) {
  if (args.size() < 2) throw reshard::Error(reshard::ErrorCode::kInvalidArgument, "usage: see gcs_tool.cpp");
  const Location where = Location::parse(args[1]);
  const std::shared_ptr<Store> store = open_store(where);
  const std::string& command = args[0];
  if (command == "put" && args.size() == 5) {
    put(*store, where, read_file(args[2]), std::stoull(args[3]), static_cast<unsigned>(std::stoul(args[4])));
  } else if (command == "write" && args.size() == 3) {
    store->write_all(where, read_file(args[2]), IfExists::kFail);
  } else if (command == "get" && args.size() == 3) {
    write_file(args[2], store->read_all(where, uint64_t{1} << 30));
  } else if (command == "ranges" && args.size() == 3) {
    std::string bytes(read_file(args[2]).size(), '\0');
    std::vector<RangeRead> ranges;
    for (size_t at = 0; at < bytes.size(); at += 10'000) {
      ranges.push_back(
          {at, std::as_writable_bytes(std::span(bytes)).subspan(at, std::min<size_t>(10'000, bytes.size() - at))});
    }
    store->read_ranges(where, ranges);
    write_file(args[2], bytes);
  } else if (command == "list" && args.size() == 2) {
    nlohmann::json out = nlohmann::json::array();
    for (const ListEntry& entry : store->list(where)) out.push_back({entry.name, entry.size});
    std::cout << out.dump() << "\n";
  } else {
    throw reshard::Error(reshard::ErrorCode::kInvalidArgument, "usage: see gcs_tool.cpp");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const reshard::Error& e) {
    std::cerr << e.name() << ": " << e.what() << "\n";
    return 1;
  }
}
