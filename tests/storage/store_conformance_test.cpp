// One suite every store driver passes: local files, memory, S3 (SeaweedFS) and
// GCS (fake-gcs-server). What differs between them (part sizes, rename) comes
// from the store itself, never from the test.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "reshard/layout/error.h"
#include "reshard/storage/open_store.h"
#include "reshard/storage/storage_error.h"
#include "storage/support/store_servers.h"
#include "support/seed.h"
#include "support/temp_dir.h"

namespace reshard::storage {
namespace {

using ::testing::HasSubstr;
using reshard::testing::TempDir;

std::string random_bytes(std::mt19937_64& rng, size_t size) {
  std::string bytes(size, '\0');
  for (char& c : bytes) c = static_cast<char>(rng());
  return bytes;
}

std::span<const std::byte> as_bytes(const std::string& text) { return std::as_bytes(std::span(text.data(), text.size())); }

// A store and a fresh folder in it for one test.
struct Place {
  std::shared_ptr<Store> store;
  Location root;
};

class StoreConformance : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string& kind = GetParam();
    if (kind == "local") {
      root_ = Location::local(temp_.path());
    } else if (kind == "memory") {
      root_ = Location::parse("memory://conformance/" + reshard::testing::unique_prefix());
    } else {
      reshard::testing::point_environment_at_servers();
      const bool s3 = kind == "s3";
      const std::string bucket = s3 ? reshard::testing::s3_server().buckets.at(0)
                                     : reshard::testing::gcs_server().buckets.at(0);
      root_ = Location::parse(fmt::format("{}://{}/{}", s3 ? "s3" : "gs", bucket, reshard::testing::unique_prefix()));
    }
    StoreOptions options;
    options.timeout = std::chrono::seconds(20);
    store_ = open_store(root_, options);
  }

  // A part layout with several parts at this store's smallest part size.
  PartLayout several_parts(uint64_t parts_and_a_bit) const {
    const PartRules rules = store_->part_rules();
    const uint64_t part = std::max<uint64_t>(rules.min_part_bytes, 4096);
    return PartLayout::plan(part * parts_and_a_bit + part / 3, part, rules);
  }

  TempDir temp_;
  Location root_;
  std::shared_ptr<Store> store_;
};

TEST_P(StoreConformance, WrittenObjectsReadBackWholeAndByRanges) {
  std::mt19937_64 rng(reshard::testing::test_seed());
  const std::string bytes = random_bytes(rng, 300'000);
  const Location object = root_.child("a/b/weights.bin");
  store_->write_all(object, bytes, IfExists::kFail);

  const std::optional<ObjectInfo> info = store_->stat(object);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->size, bytes.size());
  EXPECT_EQ(store_->read_all(object, bytes.size()), bytes);

  std::vector<std::string> outs(40);
  std::vector<RangeRead> ranges;
  for (std::string& out : outs) {
    const uint64_t offset = rng() % bytes.size();
    out.assign(rng() % std::min<uint64_t>(bytes.size() - offset, 20'000), '\0');
    ranges.push_back({offset, std::as_writable_bytes(std::span(out.data(), out.size()))});
  }
  store_->read_ranges(object, ranges);
  for (size_t i = 0; i < outs.size(); ++i) {
    EXPECT_EQ(outs[i], bytes.substr(ranges[i].offset, outs[i].size())) << "range " << i;
  }
  std::string tail(100, '\0');
  store_->read(object, bytes.size() - 100, std::as_writable_bytes(std::span(tail.data(), tail.size())));
  EXPECT_EQ(tail, bytes.substr(bytes.size() - 100));
}

TEST_P(StoreConformance, ReadsPastTheEndAndMissingObjectsAreTypedErrors) {
  const Location object = root_.child("small.json");
  store_->write_all(object, "{\"a\": 1}", IfExists::kFail);
  std::string out(16, '\0');
  try {
    store_->read(object, 4, std::as_writable_bytes(std::span(out.data(), out.size())));
    FAIL() << "a read past the end succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kIo);
    EXPECT_THAT(e.what(), HasSubstr(object.name()));
  }
  try {
    store_->read_all(root_.child("absent.json"), 1000);
    FAIL() << "reading a missing object succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kObjectNotFound) << e.what();
    EXPECT_THAT(e.what(), HasSubstr("absent.json"));
  }
  EXPECT_FALSE(store_->stat(root_.child("absent.json")).has_value());
  try {
    store_->read_all(object, 3);
    FAIL() << "read_all ignored its limit";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
  }
}

TEST_P(StoreConformance, WriteIfAbsentRefusesAnExistingObjectAndChangesNothing) {
  const Location object = root_.child("config.json");
  store_->write_all(object, "first", IfExists::kFail);
  try {
    store_->write_all(object, "second", IfExists::kFail);
    FAIL() << "an existing object was overwritten";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kAlreadyExists) << e.what();
  }
  EXPECT_EQ(store_->read_all(object, 100), "first");
  store_->write_all(object, "third", IfExists::kReplace);
  EXPECT_EQ(store_->read_all(object, 100), "third");
}

TEST_P(StoreConformance, ListsTheWholeSubtreeSortedWithNamesRelativeToThePrefix) {
  const std::vector<std::string> names = {"b.txt", "a/x y.bin", "a/z/deep.json", "c-\xc3\xa9.txt"};
  for (const std::string& name : names) store_->write_all(root_.child(name), name, IfExists::kFail);
  store_->write_all(root_.parent().child(root_.name() + "-sibling/x"), "not under root", IfExists::kReplace);

  const std::vector<ListEntry> entries = store_->list(root_);
  std::vector<std::string> listed;
  for (const ListEntry& entry : entries) {
    listed.push_back(entry.name);
    EXPECT_EQ(entry.size, entry.name.size()) << entry.name;
  }
  std::vector<std::string> expected = names;
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(listed, expected);
  EXPECT_THAT(store_->list(root_.child("a")), ::testing::SizeIs(2));
  EXPECT_TRUE(store_->list(root_.child("nothing-here")).empty());
  store_->remove(root_.parent().child(root_.name() + "-sibling/x"));
}

TEST_P(StoreConformance, RemoveDeletesAndIgnoresWhatIsAbsent) {
  const Location object = root_.child("gone.bin");
  store_->write_all(object, "x", IfExists::kFail);
  store_->remove(object);
  EXPECT_FALSE(store_->stat(object).has_value());
  EXPECT_NO_THROW(store_->remove(object));
}

TEST_P(StoreConformance, PartsWrittenByManyWritersInAnyOrderMakeOneObjectOnComplete) {
  std::mt19937_64 rng(reshard::testing::test_seed());
  const PartLayout layout = several_parts(3);
  ASSERT_GE(layout.count(), 4u);
  const std::string bytes = random_bytes(rng, layout.object_bytes());
  const Location object = root_.child("model-00001-of-00001.safetensors");

  const auto starter = store_->start_upload(object, layout, IfExists::kFail);
  std::vector<uint32_t> order(layout.count());
  std::iota(order.begin(), order.end(), 0u);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<PartReceipt> receipts(layout.count());
  std::vector<std::thread> writers;
  for (const uint32_t index : order) {
    writers.emplace_back([&, index] {
      // Each writer joins from the handle alone, as another process would.
      const auto joined = store_->join_upload(object, layout, starter->handle());
      const auto part = as_bytes(bytes).subspan(layout.offset(index), layout.size(index));
      receipts[index] = PartReceipt::parse(joined->write_part(index, part).serialize());
      joined->finish_writes();
    });
  }
  for (std::thread& writer : writers) writer.join();
  EXPECT_FALSE(store_->stat(object).has_value()) << "the object appeared before complete()";

  std::shuffle(receipts.begin(), receipts.end(), rng);
  starter->complete(receipts);
  EXPECT_EQ(store_->read_all(object, bytes.size()), bytes);
  EXPECT_EQ(store_->abort_stale_uploads(object), 0u);
  // Nothing else was left beside the object (no components, no staging).
  const std::vector<ListEntry> left = store_->list(root_);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].name, object.name());
}

TEST_P(StoreConformance, CompletingWithAMissingReceiptFailsAndLeavesNothing) {
  const PartLayout layout = several_parts(2);
  const Location object = root_.child("incomplete.bin");
  const auto upload = store_->start_upload(object, layout, IfExists::kFail);
  std::vector<PartReceipt> receipts;
  const std::string part(layout.size(0), 'x');
  receipts.push_back(upload->write_part(0, as_bytes(part)));
  EXPECT_THROW(upload->complete(receipts), Error);
  EXPECT_FALSE(store_->stat(object).has_value());
  EXPECT_TRUE(store_->list(root_).empty());
}

TEST_P(StoreConformance, AnUploadNeverCompletedLeavesNothing) {
  const PartLayout layout = several_parts(1);
  const Location object = root_.child("abandoned.bin");
  {
    const auto upload = store_->start_upload(object, layout, IfExists::kFail);
    const std::string part(layout.size(0), 'y');
    upload->write_part(0, as_bytes(part));
  }  // destroyed without complete(): aborted
  EXPECT_FALSE(store_->stat(object).has_value());
  EXPECT_TRUE(store_->list(root_).empty());
  EXPECT_EQ(store_->abort_stale_uploads(object), 0u);
}

TEST_P(StoreConformance, AnUploadRefusesAnExistingObjectBeforeWritingAnything) {
  const Location object = root_.child("exists.bin");
  store_->write_all(object, "old", IfExists::kFail);
  EXPECT_THROW(store_->start_upload(object, PartLayout::single(3), IfExists::kFail), Error);
  EXPECT_EQ(store_->read_all(object, 10), "old");
  EXPECT_EQ(store_->list(root_).size(), 1u);
  // With kReplace the upload takes its place.
  const auto upload = store_->start_upload(object, PartLayout::single(3), IfExists::kReplace);
  upload->complete({upload->write_part(0, as_bytes(std::string("new")))});
  EXPECT_EQ(store_->read_all(object, 10), "new");
}

// Starts an upload, writes a part and leaves the upload as a killed writer
// would: nothing runs after the part. Local staging is known dead by its
// process id, so it has to be another process; the memory store lives in this
// one, so there it is this process, which keeps the upload without aborting it.
// Returns the upload (kept alive, never aborted, until the test has looked)
// for the memory store; nothing for the others.
std::unique_ptr<ParallelUpload> leave_an_upload_behind(const std::string& kind, const Location& object,
                                                       const PartLayout& layout) {
  auto write_and_leave = [&](const std::shared_ptr<Store>& store) {
    auto upload = store->start_upload(object, layout, IfExists::kFail);
    const std::string part(layout.size(0), 'z');
    upload->write_part(0, as_bytes(part));
    return upload;
  };
  if (kind == "memory") return write_and_leave(open_store(object));
  const pid_t child = ::fork();
  if (child < 0) throw std::runtime_error("fork failed");
  if (child == 0) {
    try {
      // Its own client: no connection of the parent's is shared.
      StoreOptions options;
      options.timeout = std::chrono::seconds(21);
      (void)write_and_leave(open_store(object, options)).release();  // never aborted
    } catch (...) {
      ::_exit(2);
    }
    ::_exit(0);
  }
  int status = 0;
  EXPECT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the writer failed";
  return nullptr;
}

TEST_P(StoreConformance, AKilledWritersUploadIsFoundAndRemovedLater) {
  const PartLayout layout = several_parts(1);
  const Location object = root_.child("killed.bin");
  const auto left = leave_an_upload_behind(GetParam(), object, layout);
  EXPECT_FALSE(store_->stat(object).has_value());
  // Pointed out beside the object and under its folder (not by the memory
  // store, which has no reader to tell), never beside another object.
  for (const Location& where : {object, root_}) {
    const std::vector<std::string> found = store_->unfinished_uploads(where);
    if (GetParam() == "memory") {
      EXPECT_TRUE(found.empty());
      continue;
    }
    ASSERT_EQ(found.size(), 1u) << where.str();
    EXPECT_NE(found[0].find("killed.bin"), std::string::npos) << found[0];
  }
  EXPECT_TRUE(store_->unfinished_uploads(root_.child("other.bin")).empty());
  EXPECT_EQ(store_->abort_stale_uploads(object), 1u);
  EXPECT_EQ(store_->abort_stale_uploads(object), 0u);
  EXPECT_TRUE(store_->list(root_).empty());
  EXPECT_TRUE(store_->unfinished_uploads(object).empty());
  EXPECT_TRUE(store_->unfinished_uploads(root_).empty());
}

INSTANTIATE_TEST_SUITE_P(Drivers, StoreConformance, ::testing::Values("local", "memory", "s3", "gs"),
                         [](const auto& param_info) { return param_info.param; });

}  // namespace
}  // namespace reshard::storage
