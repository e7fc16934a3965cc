// The GCS driver against fake-gcs-server (started by the storage_servers
// ctest fixture), and through fault_proxy.py for retries and for counting the
// requests a parallel upload makes.
#include <sys/socket.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "reshard/layout/error.h"
#include "reshard/storage/storage_error.h"
#include "storage/gcs/gcs_store.h"
#include "storage/support/fault_proxy_process.h"
#include "storage/support/store_servers.h"
#include "support/seed.h"

namespace reshard::storage {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string random_bytes(std::mt19937_64& rng, size_t size) {
  std::string bytes(size, '\0');
  for (char& c : bytes) c = static_cast<char>(rng());
  return bytes;
}

std::span<const std::byte> bytes_of(const std::string& text) { return std::as_bytes(std::span(text)); }
std::span<std::byte> writable(std::string& text) { return std::as_writable_bytes(std::span(text)); }

// A port on 127.0.0.1 that nothing listens on: bound, then closed.
int closed_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof(address);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), size);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size);
  ::close(fd);
  return ntohs(address.sin_port);
}

// The Error `action` throws (a failed expectation when it throws none).
template <typename Action>
Error error_of(Action&& action) {
  try {
    action();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no error";
  return Error(ErrorCode::kIo, "no error");
}

class GcsStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // As point_environment_at_servers() does for GCS: the emulator, so no credentials.
    ::setenv("STORAGE_EMULATOR_HOST", reshard::testing::gcs_server().endpoint.c_str(), 1);
    bucket_ = reshard::testing::gcs_server().buckets.at(0);
    root_ = Location::object(Scheme::kGcs, bucket_, reshard::testing::unique_prefix());
    store_ = make_store(reshard::testing::gcs_server().endpoint);
  }

  static std::shared_ptr<Store> make_store(const std::string& endpoint,
                                           std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    StoreOptions options;
    options.gcs_endpoint = endpoint;
    options.timeout = timeout;
    return storage_detail::make_gcs_store(options);
  }

  std::vector<std::string> names_under(const Location& prefix) const {
    std::vector<std::string> names;
    for (const ListEntry& entry : store_->list(prefix)) names.push_back(entry.name);
    return names;
  }

  std::string bucket_;
  Location root_;
  std::shared_ptr<Store> store_;
};

TEST_F(GcsStoreTest, WritesStatsAndReadsWholeObjectsAndRanges) {
  const Location object = root_.child("dir/hello.txt");
  store_->write_all(object, "hello world", IfExists::kReplace);
  const std::optional<ObjectInfo> info = store_->stat(object);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->size, 11u);
  EXPECT_FALSE(info->version.empty());
  EXPECT_EQ(store_->read_all(object, 11), "hello world");

  std::string world(5, '\0');
  store_->read(object, 6, writable(world));
  EXPECT_EQ(world, "world");

  // A replacement is a new version.
  store_->write_all(object, "HELLO", IfExists::kReplace);
  const std::optional<ObjectInfo> replaced = store_->stat(object);
  ASSERT_TRUE(replaced.has_value());
  EXPECT_EQ(replaced->size, 5u);
  EXPECT_NE(replaced->version, info->version);
  EXPECT_EQ(store_->read_all(object, 5), "HELLO");

  // An empty object, and a zero-byte read (which asks nothing, even of a missing object).
  store_->write_all(root_.child("empty"), "", IfExists::kFail);
  EXPECT_EQ(store_->stat(root_.child("empty"))->size, 0u);
  EXPECT_EQ(store_->read_all(root_.child("empty"), 0), "");
  store_->read(root_.child("absent"), 0, {});
}

TEST_F(GcsStoreTest, ReadAllChecksTheLimitAndShortReadsAreErrors) {
  const Location object = root_.child("ten");
  store_->write_all(object, "0123456789", IfExists::kReplace);
  const Error too_big = error_of([&] { store_->read_all(object, 9); });
  EXPECT_EQ(too_big.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(too_big.what(), HasSubstr(object.str()));

  std::string out(4, '\0');
  const Error past_end = error_of([&] { store_->read(object, 8, writable(out)); });  // 2 of 4 bytes there
  EXPECT_EQ(past_end.code(), ErrorCode::kIo);
  EXPECT_THAT(past_end.what(), HasSubstr(object.str()));
  const Error beyond = error_of([&] { store_->read(object, 20, writable(out)); });  // GCS's 416
  EXPECT_EQ(beyond.code(), ErrorCode::kIo);
}

TEST_F(GcsStoreTest, ReadRangesReadsManyOverlappingRangesExactly) {
  std::mt19937_64 rng = reshard::testing::seeded_rng();
  const std::string bytes = random_bytes(rng, 1 << 20);
  const Location object = root_.child("big.bin");
  store_->write_all(object, bytes, IfExists::kReplace);
  std::vector<std::string> outs(300);
  std::vector<RangeRead> ranges;
  for (std::string& out : outs) {
    const uint64_t offset = rng() % bytes.size();
    out.assign(rng() % std::min<uint64_t>(bytes.size() - offset, 100'000), '\0');
    ranges.push_back({offset, writable(out)});
  }
  store_->read_ranges(object, ranges);
  for (size_t i = 0; i < outs.size(); ++i) {
    ASSERT_EQ(outs[i], bytes.substr(ranges[i].offset, outs[i].size())) << "range " << i;
  }
}

TEST_F(GcsStoreTest, ListsASubtreeAsAFolderSortedRelativeAndAcrossPages) {
  // More than one page (1000 names) of listing.
  constexpr size_t kObjects = 1003;
  std::vector<std::thread> writers;
  for (size_t t = 0; t < 8; ++t) {
    writers.emplace_back([&, t] {
      for (size_t i = t; i < kObjects; i += 8) {
        store_->write_all(root_.child(fmt::format("many/{:04}", kObjects - 1 - i)), "x", IfExists::kReplace);
      }
    });
  }
  for (std::thread& writer : writers) writer.join();
  store_->write_all(root_.child("a/b/c.bin"), "abc", IfExists::kReplace);
  store_->write_all(root_.child("a/d"), "d", IfExists::kReplace);
  store_->write_all(root_.child("ab"), "not under a/", IfExists::kReplace);

  const std::vector<ListEntry> under_a = store_->list(root_.child("a"));
  ASSERT_EQ(under_a.size(), 2u);
  EXPECT_EQ(under_a[0].name, "b/c.bin");
  EXPECT_EQ(under_a[0].size, 3u);
  EXPECT_EQ(under_a[1].name, "d");

  const std::vector<std::string> many = names_under(root_.child("many"));
  ASSERT_EQ(many.size(), kObjects);
  EXPECT_TRUE(std::is_sorted(many.begin(), many.end()));
  EXPECT_EQ(many.front(), "0000");
  EXPECT_EQ(many.back(), fmt::format("{:04}", kObjects - 1));
  EXPECT_EQ(store_->list(root_).size(), kObjects + 3);
  EXPECT_TRUE(store_->list(root_.child("absent")).empty());
}

TEST_F(GcsStoreTest, RemoveDeletesAndIgnoresAbsentObjects) {
  const Location object = root_.child("gone");
  store_->write_all(object, "x", IfExists::kReplace);
  store_->remove(object);
  EXPECT_FALSE(store_->stat(object).has_value());
  store_->remove(object);
}

TEST_F(GcsStoreTest, MissingObjectsFoldersAndBucketsAreTypedErrors) {
  std::string out(3, '\0');
  const Error missing = error_of([&] { store_->read(root_.child("absent"), 0, writable(out)); });
  EXPECT_EQ(missing.kind(), kObjectNotFound);
  EXPECT_THAT(missing.what(), HasSubstr(root_.child("absent").str() + ": no such object"));
  EXPECT_EQ(error_of([&] { store_->read_all(root_.child("absent"), 10); }).kind(), kObjectNotFound);
  EXPECT_FALSE(store_->stat(root_.child("absent")).has_value());

  store_->write_all(root_.child("folder/inside"), "x", IfExists::kReplace);
  EXPECT_FALSE(store_->stat(root_.child("folder")).has_value());
  const Error folder = error_of([&] { store_->read_all(root_.child("folder"), 10); });
  EXPECT_EQ(folder.kind(), kObjectNotFound);
  EXPECT_THAT(folder.what(), HasSubstr("folder"));

  const Location elsewhere =
      Location::object(Scheme::kGcs, "reshard-no-such-bucket-" + std::to_string(::getpid()), "k");
  EXPECT_EQ(error_of([&] { store_->read(elsewhere, 0, writable(out)); }).kind(), kBucketNotFound);
  EXPECT_EQ(error_of([&] { store_->stat(elsewhere); }).kind(), kBucketNotFound);
  EXPECT_EQ(error_of([&] { store_->list(elsewhere); }).kind(), kBucketNotFound);
  const Error write = error_of([&] { store_->write_all(elsewhere, "x", IfExists::kReplace); });
  EXPECT_EQ(write.kind(), kBucketNotFound);
  EXPECT_THAT(write.what(), HasSubstr(elsewhere.bucket()));
}

TEST_F(GcsStoreTest, WriteIfAbsentRefusesAnExistingObjectAndChangesNothing) {
  const Location object = root_.child("once");
  store_->write_all(object, "first", IfExists::kFail);
  const std::string version = store_->stat(object)->version;
  const Error refused = error_of([&] { store_->write_all(object, "second", IfExists::kFail); });
  EXPECT_EQ(refused.code(), ErrorCode::kAlreadyExists);
  EXPECT_THAT(refused.what(), HasSubstr(object.str()));
  EXPECT_EQ(store_->read_all(object, 100), "first");
  EXPECT_EQ(store_->stat(object)->version, version);
}

TEST_F(GcsStoreTest, PartRulesAllowSmallPartsAndBoundTheComposeTree) {
  const PartRules rules = store_->part_rules();
  EXPECT_EQ(rules.min_part_bytes, 1u);
  EXPECT_EQ(rules.max_parts, 1024u);  // a composite object's component limit
  EXPECT_EQ(rules.default_part_bytes, uint64_t{64} << 20);
  const PartLayout layout = PartLayout::plan(uint64_t{1} << 40, 0, rules);  // 1 TiB
  EXPECT_LE(layout.count(), 1024u);
  EXPECT_THROW(store_->start_upload(root_.child("x"), PartLayout::plan(5000, 1, PartRules{}), IfExists::kReplace),
               Error);
}

// 70 parts (three composes of at most 32, then one of three), written by
// four threads that each joined the upload by its handle, through a proxy
// that counts the composes.
TEST_F(GcsStoreTest, ASeventyPartUploadFromManyWritersComposesInATreeAndCleansUp) {
  reshard::testing::FaultProxyProcess proxy(reshard::testing::gcs_server().endpoint);
  const std::shared_ptr<Store> store = make_store(proxy.url());
  std::mt19937_64 rng = reshard::testing::seeded_rng();
  const std::string bytes = random_bytes(rng, 70 * 4096 - 123);
  const PartLayout layout = PartLayout::plan(bytes.size(), 4096, store->part_rules());
  ASSERT_EQ(layout.count(), 70u);
  const Location object = root_.child("model/weights.bin");

  std::unique_ptr<ParallelUpload> upload = store->start_upload(object, layout, IfExists::kFail);
  const std::string handle = upload->handle();
  std::vector<std::string> receipts(layout.count());
  std::vector<std::thread> writers;
  for (uint32_t w = 0; w < 4; ++w) {
    writers.emplace_back([&, w] {
      const std::unique_ptr<ParallelUpload> joined = store->join_upload(object, layout, handle);
      for (uint32_t part = layout.count() - 1 - w;; part -= 4) {  // last parts first
        const std::string_view piece = std::string_view(bytes).substr(layout.offset(part), layout.size(part));
        receipts[part] = joined->write_part(part, std::as_bytes(std::span(piece))).serialize();
        if (part < 4) break;
      }
      joined->finish_writes();
    });
  }
  for (std::thread& writer : writers) writer.join();
  std::vector<PartReceipt> parsed;
  for (const std::string& text : receipts) parsed.push_back(PartReceipt::parse(text));
  std::shuffle(parsed.begin(), parsed.end(), rng);
  upload->complete(parsed);

  EXPECT_EQ(store->stat(object)->size, bytes.size());
  std::string back(bytes.size(), '\0');
  std::vector<RangeRead> ranges;
  for (uint64_t at = 0; at < bytes.size(); at += 10'000) {
    ranges.push_back({at, writable(back).subspan(at, std::min<uint64_t>(10'000, bytes.size() - at))});
  }
  store->read_ranges(object, ranges);
  EXPECT_TRUE(back == bytes) << "the composed object differs from what was written";
  EXPECT_THAT(names_under(root_), ::testing::ElementsAre("model/weights.bin"));

  std::vector<std::string> composed;
  for (const auto& entry : proxy.log()) {
    const std::string path = entry.at("path").get<std::string>();
    if (path.find("/compose") != std::string::npos) composed.push_back(path);
  }
  ASSERT_EQ(composed.size(), 4u);
  EXPECT_EQ(std::count_if(composed.begin(), composed.end(),
                          [](const std::string& p) { return p.find("tmp-reshard") != std::string::npos; }),
            3);
}

TEST_F(GcsStoreTest, CompleteRefusesMissingRepeatedAndStaleReceiptsAndAborts) {
  const Location object = root_.child("checked.bin");
  const PartLayout layout = PartLayout::plan(30, 10, store_->part_rules());
  const std::string bytes = "aaaaaaaaaabbbbbbbbbbcccccccccc";
  auto write_all_parts = [&](ParallelUpload& upload) {
    std::vector<PartReceipt> receipts;
    for (uint32_t i = 0; i < 3; ++i) {
      receipts.push_back(upload.write_part(i, bytes_of(bytes.substr(10 * i, 10))));
    }
    return receipts;
  };
  {
    auto upload = store_->start_upload(object, layout, IfExists::kReplace);
    std::vector<PartReceipt> receipts = write_all_parts(*upload);
    receipts.pop_back();
    EXPECT_EQ(error_of([&] { upload->complete(receipts); }).code(), ErrorCode::kInvalidArgument);
    EXPECT_TRUE(store_->list(root_).empty()) << "a failed complete aborts";
  }
  {
    auto upload = store_->start_upload(object, layout, IfExists::kReplace);
    std::vector<PartReceipt> receipts = write_all_parts(*upload);
    receipts[2] = receipts[1];
    EXPECT_EQ(error_of([&] { upload->complete(receipts); }).code(), ErrorCode::kInvalidArgument);
  }
  {
    auto upload = store_->start_upload(object, layout, IfExists::kReplace);
    const std::vector<PartReceipt> receipts = write_all_parts(*upload);
    upload->write_part(1, bytes_of(std::string(10, 'B')));  // rewritten after its receipt
    const Error stale = error_of([&] { upload->complete(receipts); });
    EXPECT_EQ(stale.code(), ErrorCode::kInvalidArgument);
    EXPECT_THAT(stale.what(), HasSubstr("part 1"));
  }
  {
    auto upload = store_->start_upload(object, layout, IfExists::kReplace);
    EXPECT_EQ(error_of([&] { upload->write_part(0, bytes_of("short")); }).code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(error_of([&] { upload->write_part(3, bytes_of("x")); }).code(), ErrorCode::kInvalidArgument);
  }
  EXPECT_FALSE(store_->stat(object).has_value());
  EXPECT_TRUE(store_->list(root_).empty());
}

TEST_F(GcsStoreTest, AbortAndAnAbandonedStarterLeaveNothingButJoinersDoNotAbort) {
  const Location object = root_.child("aborted.bin");
  const PartLayout layout = PartLayout::plan(25, 10, store_->part_rules());
  const std::string part(10, 'p');
  {
    auto upload = store_->start_upload(object, layout, IfExists::kReplace);
    upload->write_part(0, bytes_of(part));
    upload->write_part(1, bytes_of(part));
    EXPECT_FALSE(store_->list(root_).empty());
    upload->abort();
    EXPECT_TRUE(store_->list(root_).empty());
    upload->abort();  // twice is fine
  }
  {
    auto upload = store_->start_upload(object, layout, IfExists::kReplace);
    upload->write_part(0, bytes_of(part));
  }  // destroyed uncompleted: aborted
  EXPECT_TRUE(store_->list(root_).empty());

  auto upload = store_->start_upload(object, layout, IfExists::kReplace);
  std::vector<PartReceipt> receipts;
  {
    auto joined = store_->join_upload(object, layout, upload->handle());
    receipts.push_back(joined->write_part(2, bytes_of("tail!")));
  }  // a joiner going away keeps its parts
  receipts.push_back(upload->write_part(0, bytes_of(part)));
  receipts.push_back(upload->write_part(1, bytes_of(part)));
  upload->complete(receipts);
  EXPECT_EQ(store_->read_all(object, 100), part + part + "tail!");
  EXPECT_THAT(names_under(root_), ::testing::ElementsAre("aborted.bin"));
  EXPECT_EQ(error_of([&] { store_->join_upload(object, layout, "not-a-handle"); }).code(),
            ErrorCode::kInvalidArgument);
}

TEST_F(GcsStoreTest, UploadsRefuseAnExistingObjectAtStartAndAtComplete) {
  const Location object = root_.child("exists.bin");
  store_->write_all(object, "original", IfExists::kReplace);
  const PartLayout layout = PartLayout::plan(20, 10, store_->part_rules());
  const Error at_start = error_of([&] { store_->start_upload(object, layout, IfExists::kFail); });
  EXPECT_EQ(at_start.code(), ErrorCode::kAlreadyExists);
  EXPECT_THAT(at_start.what(), HasSubstr(object.str()));
  EXPECT_THAT(names_under(root_), ::testing::ElementsAre("exists.bin"));

  // The object appears while the upload runs: complete refuses, nothing changes, nothing is left.
  const Location late = root_.child("late.bin");
  auto upload = store_->start_upload(late, layout, IfExists::kFail);
  std::vector<PartReceipt> receipts{upload->write_part(0, bytes_of(std::string(10, 'a'))),
                                    upload->write_part(1, bytes_of(std::string(10, 'b')))};
  store_->write_all(late, "someone else", IfExists::kReplace);
  EXPECT_EQ(error_of([&] { upload->complete(receipts); }).code(), ErrorCode::kAlreadyExists);
  EXPECT_EQ(store_->read_all(late, 100), "someone else");
  EXPECT_THAT(names_under(root_), ::testing::ElementsAre("exists.bin", "late.bin"));
}

TEST_F(GcsStoreTest, AbortStaleUploadsRemovesEveryLeftoverUploadOfThatObjectOnly) {
  const Location object = root_.child("stale.bin");
  const Location other = root_.child("stale.bin2");
  const PartLayout layout = PartLayout::plan(20, 10, store_->part_rules());
  // Writers that died: joined uploads never abort on destruction.
  for (const char* nonce : {"0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"}) {
    auto joined = store_->join_upload(object, layout, std::string(nonce) + ":replace");
    joined->write_part(0, bytes_of(std::string(10, 'x')));
    joined->write_part(1, bytes_of(std::string(10, 'y')));
  }
  auto kept = store_->join_upload(other, layout, "00000000000000000000000000000000:fail");
  kept->write_part(0, bytes_of(std::string(10, 'z')));

  EXPECT_EQ(store_->abort_stale_uploads(object), 2u);
  EXPECT_EQ(store_->abort_stale_uploads(object), 0u);
  const std::vector<std::string> left = names_under(root_);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_THAT(left[0], HasSubstr("stale.bin2"));
  EXPECT_EQ(store_->abort_stale_uploads(other), 1u);
  EXPECT_TRUE(store_->list(root_).empty());
}

TEST_F(GcsStoreTest, AClosedPortIsUnreachableWithinTheTimeout) {
  const std::string endpoint = fmt::format("http://127.0.0.1:{}", closed_port());
  const std::shared_ptr<Store> store = make_store(endpoint, std::chrono::seconds(2));
  const auto start = std::chrono::steady_clock::now();
  const Error error = error_of([&] { store->stat(root_.child("x")); });
  const auto spent = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(error.kind(), kStoreUnreachable) << error.what();
  EXPECT_THAT(error.what(), HasSubstr(endpoint));
  EXPECT_LT(spent, std::chrono::seconds(5));
  EXPECT_GE(spent, std::chrono::milliseconds(1500)) << "it should retry for the timeout";
}

TEST_F(GcsStoreTest, RetriesThrough503And429AndResetsToSuccess) {
  reshard::testing::FaultProxyProcess proxy(reshard::testing::gcs_server().endpoint);
  const std::shared_ptr<Store> store = make_store(proxy.url());
  const Location object = root_.child("flaky.bin");
  proxy.add_rule({{"kind", "status"}, {"status", 503}, {"path", "uploadType="}, {"times", 2}});
  proxy.add_rule({{"kind", "status"}, {"status", 429}, {"path", "alt=media"}, {"times", 1}});
  proxy.add_rule({{"kind", "reset"}, {"path", "alt=media"}, {"times", 1}});
  store->write_all(object, "resilient", IfExists::kReplace);
  std::string out(9, '\0');
  store->read(object, 0, writable(out));
  EXPECT_EQ(out, "resilient");

  // The reply to a conditional write is lost after the store acted: the retry
  // meets a 412 from its own first attempt, which is success, not "exists".
  const Location once = root_.child("once.bin");
  proxy.add_rule({{"kind", "reset"}, {"path", "ifGenerationMatch=0"}, {"when", "after"}, {"times", 1}});
  store->write_all(once, "written once", IfExists::kFail);
  EXPECT_EQ(store->read_all(once, 100), "written once");
  EXPECT_EQ(error_of([&] { store->write_all(once, "again", IfExists::kFail); }).code(), ErrorCode::kAlreadyExists);

  // The same for the final compose of a parallel upload.
  const Location composed = root_.child("composed.bin");
  const PartLayout layout = PartLayout::plan(20, 10, store->part_rules());
  auto upload = store->start_upload(composed, layout, IfExists::kFail);
  std::vector<PartReceipt> receipts{upload->write_part(0, bytes_of(std::string(10, 'a'))),
                                    upload->write_part(1, bytes_of(std::string(10, 'b')))};
  proxy.add_rule({{"kind", "reset"}, {"path", "/compose"}, {"when", "after"}, {"times", 1}});
  upload->complete(receipts);
  EXPECT_EQ(store->read_all(composed, 100), std::string(10, 'a') + std::string(10, 'b'));

  std::map<std::string, int> faults;  // "status 503", "reset", ...
  for (const auto& entry : proxy.log()) {
    if (entry.at("fault").is_null()) continue;
    const std::string fault = entry.at("fault").get<std::string>();
    faults[fault == "status" ? fmt::format("status {}", entry.at("status").get<int>()) : fault]++;
  }
  EXPECT_EQ(faults["status 503"], 2);
  EXPECT_EQ(faults["status 429"], 1);
  EXPECT_EQ(faults["reset"], 3);
}

TEST_F(GcsStoreTest, AStoreFailingPastTheBudgetIsUnreachableWithItsStatus) {
  reshard::testing::FaultProxyProcess proxy(reshard::testing::gcs_server().endpoint);
  const std::shared_ptr<Store> store = make_store(proxy.url(), std::chrono::seconds(1));
  proxy.add_rule({{"kind", "status"}, {"status", 503}, {"times", nullptr}});
  const Error error = error_of([&] { store->stat(root_.child("x")); });
  EXPECT_EQ(error.kind(), kStoreUnreachable);
  EXPECT_THAT(error.what(), HasSubstr("503"));
  EXPECT_THAT(error.what(), Not(HasSubstr("Authorization")));
}

}  // namespace
}  // namespace reshard::storage
