// The S3 driver against a real S3 server (SeaweedFS, started by the ctest
// fixture storage_servers): every Store method, parallel uploads from many
// threads, the errors' kinds and words (with no secret in them), and retries
// through fault_proxy.py.
#include "storage/s3/s3_store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "reshard/storage/storage_error.h"
#include "storage/support/aws_environment.h"
#include "storage/support/fault_proxy_process.h"
#include "storage/s3/s3_client.h"
#include "storage/s3/s3_xml.h"
#include "storage/support/store_servers.h"
#include "storage/support/unused_port.h"

namespace reshard::storage_detail {
namespace {

using storage::IfExists;
using storage::Location;
using storage::PartLayout;
using storage::PartReceipt;
using testing::ScopedAwsEnvironment;

constexpr uint64_t kMiB = 1 << 20;

std::string random_bytes(size_t size, uint64_t seed) {
  std::mt19937_64 random(seed);
  std::string bytes(size, '\0');
  for (char& c : bytes) c = static_cast<char>(random());
  return bytes;
}

std::span<std::byte> writable(std::string& text) { return std::as_writable_bytes(std::span(text)); }
std::span<const std::byte> bytes_of(std::string_view text) { return std::as_bytes(std::span(text)); }

class S3StoreTest : public ::testing::Test {
 protected:
  S3StoreTest() : server_(testing::s3_server()) {
    ScopedAwsEnvironment::set("AWS_ACCESS_KEY_ID", server_.access_key);
    ScopedAwsEnvironment::set("AWS_SECRET_ACCESS_KEY", server_.secret_key);
    ScopedAwsEnvironment::set("AWS_REGION", server_.region);
    ScopedAwsEnvironment::set("AWS_ENDPOINT_URL", server_.endpoint);
    options_.timeout = std::chrono::seconds(10);
    store_ = make_s3_store(options_);
    bucket_ = server_.buckets.at(0);
    prefix_ = testing::unique_prefix();
  }

  Location at(const std::string& name) const {
    return Location::object(storage::Scheme::kS3, bucket_, prefix_ + "/" + name);
  }

  // The error `action` throws (a test failure when it throws none), checked
  // for secrets: no secret key, session token or signature in its text.
  template <typename Action>
  Error failure(Action&& action, const std::vector<std::string>& secrets = {}) const {
    try {
      action();
    } catch (const Error& error) {
      const std::string text = error.what();
      for (const std::string& secret : secrets) EXPECT_EQ(text.find(secret), std::string::npos) << text;
      for (const std::string& secret : {server_.secret_key, std::string("Signature="), std::string("AWS4-HMAC")}) {
        EXPECT_EQ(text.find(secret), std::string::npos) << text;
      }
      return error;
    }
    ADD_FAILURE() << "no error";
    return Error(ErrorCode::kIo, "no error");
  }

  ScopedAwsEnvironment environment_;
  const testing::S3Server& server_;
  storage::StoreOptions options_;
  std::shared_ptr<storage::Store> store_;
  std::string bucket_;
  std::string prefix_;
};

TEST_F(S3StoreTest, WritesReadsAndStats) {
  EXPECT_EQ(store_->name(), "s3");
  const Location object = at("a b+c=d~e/ünï%20.bin");
  const std::string bytes = random_bytes(100000, 1);
  EXPECT_FALSE(store_->stat(object));
  store_->write_all(object, bytes, IfExists::kFail);

  const auto info = store_->stat(object);
  ASSERT_TRUE(info);
  EXPECT_EQ(info->size, bytes.size());
  EXPECT_FALSE(info->version.empty());
  EXPECT_EQ(store_->read_all(object, bytes.size()), bytes);

  std::string part(1000, '\0');
  store_->read(object, 12345, writable(part));
  EXPECT_EQ(part, bytes.substr(12345, 1000));
  store_->read(object, bytes.size() - 1000, writable(part));
  EXPECT_EQ(part, bytes.substr(bytes.size() - 1000));
  std::string none;
  store_->read(object, 5 * bytes.size(), writable(none));  // nothing asked, nothing read

  // A range past the end, or running over it, is an I/O error naming the object.
  for (const uint64_t offset : {uint64_t{bytes.size()}, uint64_t{bytes.size() - 10}}) {
    const Error error = failure([&] { store_->read(object, offset, writable(part)); });
    EXPECT_EQ(error.code(), ErrorCode::kIo);
    EXPECT_NE(std::string(error.what()).find(object.str()), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("100000 bytes"), std::string::npos) << error.what();
  }

  // Replaced: a new version.
  store_->write_all(object, "short", IfExists::kReplace);
  EXPECT_EQ(store_->read_all(object, 5), "short");
  EXPECT_NE(store_->stat(object)->version, info->version);
}

TEST_F(S3StoreTest, ReadsManyRangesAtOnce) {
  const Location object = at("ranges");
  const std::string bytes = random_bytes(3 * kMiB, 2);
  store_->write_all(object, bytes, IfExists::kReplace);
  std::mt19937_64 random(3);
  std::vector<std::string> outs;
  std::vector<storage::RangeRead> ranges;
  for (int i = 0; i < 40; ++i) {
    const uint64_t size = random() % 200000;
    outs.emplace_back(size, '\0');
  }
  for (std::string& out : outs) {
    ranges.push_back({random() % (bytes.size() - out.size()), writable(out)});
  }
  store_->read_ranges(object, ranges);
  for (size_t i = 0; i < ranges.size(); ++i) {
    EXPECT_EQ(outs[i], bytes.substr(ranges[i].offset, outs[i].size())) << "range " << i;
  }
}

TEST_F(S3StoreTest, ReadAllRefusesMoreThanTheLimit) {
  const Location object = at("big");
  store_->write_all(object, random_bytes(1000, 4), IfExists::kReplace);
  const Error error = failure([&] { store_->read_all(object, 999); });
  EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(std::string(error.what()).find(object.str()), std::string::npos) << error.what();
  EXPECT_NE(std::string(error.what()).find("999"), std::string::npos) << error.what();

  const Location empty = at("empty");
  store_->write_all(empty, "", IfExists::kFail);
  EXPECT_EQ(store_->read_all(empty, 0), "");
  EXPECT_EQ(store_->stat(empty)->size, 0u);
}

TEST_F(S3StoreTest, MissingObjectsBucketsAndFolders) {
  std::string out(10, '\0');
  const Location missing = at("missing");
  for (const auto& action : std::vector<std::function<void()>>{
           [&] { store_->read(missing, 0, writable(out)); }, [&] { store_->read_all(missing, 100); }}) {
    const Error error = failure(action);
    EXPECT_EQ(error.kind(), storage::kObjectNotFound);
    EXPECT_EQ(std::string(error.what()), missing.str() + ": no such object");
  }

  store_->write_all(at("folder/x"), "x", IfExists::kReplace);
  EXPECT_FALSE(store_->stat(at("folder")));
  const Error folder = failure([&] { store_->read_all(at("folder"), 100); });
  EXPECT_EQ(folder.kind(), storage::kObjectNotFound);
  EXPECT_NE(std::string(folder.what()).find("folder"), std::string::npos) << folder.what();

  // Keys with dot segments are refused: HTTP clients would resolve them.
  EXPECT_EQ(failure([&] { store_->stat(at("a/../b")); }).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(failure([&] { store_->write_all(at("a/./b"), "x", IfExists::kReplace); }).code(),
            ErrorCode::kInvalidArgument);

  const Location nowhere = Location::object(storage::Scheme::kS3, "no-such-bucket-reshard", "k");
  for (const auto& action : std::vector<std::function<void()>>{
           [&] { store_->stat(nowhere); }, [&] { store_->read(nowhere, 0, writable(out)); },
           [&] { store_->read_all(nowhere, 10); }, [&] { store_->write_all(nowhere, "x", IfExists::kReplace); },
           [&] { store_->list(nowhere); },
           [&] { store_->start_upload(nowhere, PartLayout::single(1), IfExists::kReplace); }}) {
    const Error error = failure(action);
    EXPECT_EQ(error.kind(), storage::kBucketNotFound) << error.what();
    EXPECT_NE(std::string(error.what()).find("s3://no-such-bucket-reshard"), std::string::npos) << error.what();
  }
}

TEST_F(S3StoreTest, IfExistsFailLeavesTheObjectAsItWas) {
  const Location object = at("once");
  store_->write_all(object, "first", IfExists::kFail);
  const Error error = failure([&] { store_->write_all(object, "second", IfExists::kFail); });
  EXPECT_EQ(error.code(), ErrorCode::kAlreadyExists);
  EXPECT_NE(std::string(error.what()).find(object.str()), std::string::npos);
  EXPECT_EQ(store_->read_all(object, 100), "first");
  store_->write_all(object, "third", IfExists::kReplace);
  EXPECT_EQ(store_->read_all(object, 100), "third");
}

TEST_F(S3StoreTest, ListsTheSubtreeRelativeAndSorted) {
  const std::vector<std::string> names{"b", "a b+c", "sub/deeper/ü=~", "sub/x", "100%", "z"};
  for (const std::string& name : names) store_->write_all(at("tree/" + name), name, IfExists::kReplace);
  store_->write_all(at("tree2/not-under"), "x", IfExists::kReplace);  // shares the prefix "tree"
  store_->write_all(at("tree"), "an object beside the folder", IfExists::kReplace);

  // A small page size: the listing follows continuation tokens.
  const auto paged = make_s3_store(options_, 2);
  for (const auto& store : {store_, paged}) {
    const std::vector<storage::ListEntry> entries = store->list(at("tree"));
    std::vector<std::string> listed;
    for (const storage::ListEntry& entry : entries) {
      listed.push_back(entry.name);
      EXPECT_EQ(entry.size, entry.name.size());
    }
    std::vector<std::string> expected = names;
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(listed, expected);
  }
  EXPECT_EQ(store_->list(at("tree/sub")).size(), 2u);
  EXPECT_TRUE(store_->list(at("absent")).empty());
  EXPECT_TRUE(store_->list(at("tree/b")).empty());  // an object, not a folder
}

TEST_F(S3StoreTest, RemovesAndIgnoresWhatIsAbsent) {
  const Location object = at("doomed");
  store_->write_all(object, "x", IfExists::kReplace);
  store_->remove(object);
  EXPECT_FALSE(store_->stat(object));
  store_->remove(object);
  store_->remove(at("never-there"));
}

TEST_F(S3StoreTest, ParallelUploadFromManyThreads) {
  const Location object = at("model.safetensors");
  const std::string bytes = random_bytes(17 * kMiB + 12345, 5);
  const PartLayout layout = PartLayout::plan(bytes.size(), 5 * kMiB, store_->part_rules());
  ASSERT_EQ(layout.count(), 4u);
  const auto starter = store_->start_upload(object, layout, IfExists::kFail);
  EXPECT_EQ(starter->destination(), object);
  EXPECT_EQ(starter->parts(), layout);
  const std::string handle = starter->handle();
  EXPECT_FALSE(handle.empty());

  // Each "process" joins from the handle, writes its parts and hands on its
  // receipts as text.
  std::vector<std::string> receipts(layout.count());
  std::vector<std::thread> writers;
  for (uint32_t index = layout.count(); index-- > 0;) {
    writers.emplace_back([&, index] {
      const auto joined = make_s3_store(options_)->join_upload(object, layout, handle);
      const std::string_view part = std::string_view(bytes).substr(layout.offset(index), layout.size(index));
      receipts[index] = joined->write_part(index, bytes_of(part)).serialize();
      joined->finish_writes();
    });
  }
  for (std::thread& writer : writers) writer.join();
  EXPECT_FALSE(store_->stat(object));  // nothing visible before completing
  std::vector<PartReceipt> parsed;
  for (const std::string& text : receipts) parsed.push_back(PartReceipt::parse(text));
  std::reverse(parsed.begin(), parsed.end());  // any order
  starter->complete(parsed);

  EXPECT_EQ(store_->stat(object)->size, bytes.size());
  std::vector<std::string> outs{std::string(kMiB, '\0'), std::string(3 * kMiB, '\0'), std::string(100, '\0')};
  const std::vector<storage::RangeRead> ranges{{5 * kMiB - kMiB / 2, writable(outs[0])},
                                               {9 * kMiB, writable(outs[1])},
                                               {bytes.size() - 100, writable(outs[2])}};
  store_->read_ranges(object, ranges);
  for (size_t i = 0; i < ranges.size(); ++i) EXPECT_TRUE(outs[i] == bytes.substr(ranges[i].offset, outs[i].size()));
  EXPECT_TRUE(store_->read_all(object, bytes.size()) == bytes);
  EXPECT_EQ(store_->abort_stale_uploads(object), 0u);
}

TEST_F(S3StoreTest, AbortLeavesNothingBehind) {
  const Location object = at("aborted");
  const std::string part = random_bytes(5 * kMiB, 6);
  const PartLayout layout = PartLayout::plan(10 * kMiB, 5 * kMiB, store_->part_rules());
  {
    const auto upload = store_->start_upload(object, layout, IfExists::kReplace);
    upload->write_part(0, bytes_of(part));
    upload->abort();
    upload->abort();  // again: no error
    // Writing into an aborted upload fails.
    const Error gone =
        failure([&] { store_->join_upload(object, layout, upload->handle())->write_part(1, bytes_of(part)); });
    EXPECT_EQ(gone.kind(), storage::kStoreError);
    EXPECT_NE(std::string(gone.what()).find("HTTP 404 (NoSuchUpload"), std::string::npos) << gone.what();
  }
  {
    // The starter's object aborts when it goes without completing.
    const auto upload = store_->start_upload(object, layout, IfExists::kReplace);
    upload->write_part(1, bytes_of(part));
  }
  EXPECT_EQ(store_->abort_stale_uploads(object), 0u);  // none left to find
  EXPECT_FALSE(store_->stat(object));
}

TEST_F(S3StoreTest, CompleteNeedsEveryReceiptOnce) {
  const Location object = at("receipts");
  const std::string bytes = random_bytes(11 * kMiB, 7);
  const PartLayout layout = PartLayout::plan(bytes.size(), 5 * kMiB, store_->part_rules());
  ASSERT_EQ(layout.count(), 3u);
  const auto write_all_parts = [&](storage::ParallelUpload& upload) {
    std::vector<PartReceipt> receipts;
    for (uint32_t i = 0; i < layout.count(); ++i) {
      receipts.push_back(
          upload.write_part(i, bytes_of(std::string_view(bytes).substr(layout.offset(i), layout.size(i)))));
    }
    return receipts;
  };
  for (const auto& spoil : std::vector<std::function<void(std::vector<PartReceipt>&)>>{
           [](std::vector<PartReceipt>& r) { r.pop_back(); },
           [](std::vector<PartReceipt>& r) { r[2] = r[1]; },
           [](std::vector<PartReceipt>& r) { r.push_back(r[0]); },
           [](std::vector<PartReceipt>& r) { r[1].index = 7; }}) {
    const auto upload = store_->start_upload(object, layout, IfExists::kReplace);
    std::vector<PartReceipt> receipts = write_all_parts(*upload);
    spoil(receipts);
    const Error error = failure([&] { upload->complete(receipts); });
    EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument) << error.what();
    // Aborted on the way out: nothing there, and no upload left.
    EXPECT_FALSE(store_->stat(object));
    EXPECT_EQ(store_->abort_stale_uploads(object), 0u);
  }

  // A part of the wrong size is refused before it is sent.
  const auto upload = store_->start_upload(object, layout, IfExists::kReplace);
  EXPECT_EQ(failure([&] { upload->write_part(0, bytes_of(std::string_view(bytes).substr(0, 100))); }).code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(failure([&] { upload->write_part(3, bytes_of(bytes)); }).code(), ErrorCode::kInvalidArgument);
  upload->complete(write_all_parts(*upload));
  EXPECT_TRUE(store_->read_all(object, bytes.size()) == bytes);
}

TEST_F(S3StoreTest, UploadsRefuseAnExistingObjectWithIfExistsFail) {
  const Location object = at("taken");
  store_->write_all(object, "original", IfExists::kReplace);
  const PartLayout layout = PartLayout::single(5);
  EXPECT_EQ(failure([&] { store_->start_upload(object, layout, IfExists::kFail); }).code(),
            ErrorCode::kAlreadyExists);

  // Appears while the upload runs: refused when completing, the other writer's object kept.
  const Location raced = at("raced");
  const auto upload = store_->start_upload(raced, layout, IfExists::kFail);
  const PartReceipt receipt = upload->write_part(0, bytes_of("12345"));
  store_->write_all(raced, "theirs", IfExists::kReplace);
  EXPECT_EQ(failure([&] { upload->complete({receipt}); }).code(), ErrorCode::kAlreadyExists);
  EXPECT_EQ(store_->read_all(raced, 100), "theirs");
  EXPECT_EQ(store_->abort_stale_uploads(raced), 0u);

  // kReplace takes its place; an empty object is one empty part.
  const auto replace = store_->start_upload(object, layout, IfExists::kReplace);
  replace->complete({replace->write_part(0, bytes_of("fresh"))});
  EXPECT_EQ(store_->read_all(object, 100), "fresh");
  const auto empty = store_->start_upload(at("empty-upload"), PartLayout::single(0), IfExists::kFail);
  empty->complete({empty->write_part(0, {})});
  EXPECT_EQ(store_->stat(at("empty-upload"))->size, 0u);
}

TEST_F(S3StoreTest, AbortsStaleUploadsOfThatKeyOnly) {
  // Uploads a killed writer left behind: started, a part written, never ended.
  S3Client client(options_);
  const auto leave_upload = [&](const Location& object) {
    S3Request start{"POST", object.bucket(), object.key(), {{"uploads", ""}}, {}, {}, {}, false};
    const HttpResponse started = client.send(start);
    ASSERT_TRUE(started.ok()) << started.status << started.body;
    const std::string upload_id = parse_upload_id(started.body);
    (void)store_->join_upload(object, PartLayout::single(1), upload_id)->write_part(0, bytes_of("x"));
  };
  const Location object = at("stale a+b%2B");
  const Location longer = at("stale a+b%2B-not");  // a key the first is a prefix of
  leave_upload(object);
  leave_upload(object);
  leave_upload(longer);
  EXPECT_EQ(store_->abort_stale_uploads(object), 2u);
  EXPECT_EQ(store_->abort_stale_uploads(object), 0u);
  EXPECT_EQ(store_->abort_stale_uploads(longer), 1u);
  EXPECT_FALSE(store_->stat(object));
}

TEST_F(S3StoreTest, WrongSecretIsAccessDeniedNamingTheSource) {
  const std::string wrong = "wrong-secret-never-to-be-printed";
  ScopedAwsEnvironment::set("AWS_SECRET_ACCESS_KEY", wrong);
  ScopedAwsEnvironment::set("AWS_SESSION_TOKEN", "session-token-never-to-be-printed");
  const auto denied = make_s3_store(options_);
  std::string out(1, '\0');
  for (const auto& action : std::vector<std::function<void()>>{
           [&] { denied->write_all(at("x"), "x", IfExists::kReplace); }, [&] { denied->stat(at("x")); },
           [&] { denied->read(at("x"), 0, writable(out)); }, [&] { denied->list(at("")); },
           [&] { denied->start_upload(at("x"), PartLayout::single(1), IfExists::kReplace); }}) {
    const Error error = failure(action, {wrong, "session-token-never-to-be-printed"});
    EXPECT_EQ(error.kind(), storage::kAccessDenied) << error.what();
    EXPECT_NE(std::string(error.what()).find("environment variables AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY"),
              std::string::npos)
        << error.what();
  }
}

TEST_F(S3StoreTest, EndpointThatDoesNotAnswerIsUnreachable) {
  storage::StoreOptions options = options_;
  options.timeout = std::chrono::seconds(2);
  options.s3_endpoint = testing::unanswered_endpoint();
  const auto start = std::chrono::steady_clock::now();
  const Error error = failure([&] { make_s3_store(options)->read_all(at("x"), 10); });
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(error.kind(), storage::kStoreUnreachable) << error.what();
  EXPECT_NE(std::string(error.what()).find(options.s3_endpoint), std::string::npos) << error.what();
  EXPECT_NE(std::string(error.what()).find(at("x").str()), std::string::npos) << error.what();
  EXPECT_GE(took, std::chrono::milliseconds(1500));
  EXPECT_LT(took, std::chrono::seconds(5));
}

TEST_F(S3StoreTest, RetriesThrottlingErrorsAndResets) {
  const testing::FaultProxyProcess proxy(server_.endpoint);
  storage::StoreOptions options = options_;
  options.s3_endpoint = proxy.url();
  const auto store = make_s3_store(options);
  proxy.add_rule({{"kind", "status"}, {"status", 503}, {"method", "PUT"}, {"times", 2}});
  proxy.add_rule({{"kind", "status"}, {"status", 429}, {"method", "GET"}, {"times", 1}});
  proxy.add_rule({{"kind", "reset"}, {"method", "HEAD"}, {"times", 1}});
  const Location object = at("retried");
  const std::string bytes = random_bytes(300000, 8);
  store->write_all(object, bytes, IfExists::kReplace);
  EXPECT_EQ(store->stat(object)->size, bytes.size());
  std::string out(1000, '\0');
  store->read(object, 5000, writable(out));
  EXPECT_EQ(out, bytes.substr(5000, 1000));

  // Answers lost after the store acted: a conditional PUT and a Complete that
  // already took effect are found done, not reported as failures.
  proxy.add_rule({{"kind", "reset"}, {"when", "after"}, {"method", "PUT"}, {"times", 1}});
  store->write_all(at("lost-answer"), "once", IfExists::kFail);
  EXPECT_EQ(store->read_all(at("lost-answer"), 10), "once");
  const auto upload = store->start_upload(at("lost-complete"), PartLayout::single(3), IfExists::kFail);
  const PartReceipt receipt = upload->write_part(0, bytes_of("abc"));
  proxy.add_rule({{"kind", "reset"}, {"when", "after"}, {"method", "POST"}, {"path", "uploadId="}, {"times", 1}});
  upload->complete({receipt});
  EXPECT_EQ(store->read_all(at("lost-complete"), 10), "abc");

  int faults = 0;
  for (const auto& entry : proxy.log()) faults += entry.value("fault", nlohmann::json()).is_null() ? 0 : 1;
  EXPECT_EQ(faults, 6) << proxy.log().dump();

  // A store that keeps failing is given up on once the timeout has passed.
  proxy.add_rule({{"kind", "status"}, {"status", 503}, {"path", "never-ok"}, {"times", nullptr}});
  options.timeout = std::chrono::seconds(1);
  const Error error = failure([&] { make_s3_store(options)->read_all(at("never-ok"), 10); });
  EXPECT_EQ(error.kind(), storage::kStoreUnreachable) << error.what();
  EXPECT_NE(std::string(error.what()).find("kept failing with HTTP 503"), std::string::npos) << error.what();
}

}  // namespace
}  // namespace reshard::storage_detail
