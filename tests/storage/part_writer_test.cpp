#include "reshard/storage/part_writer.h"

#include <algorithm>
#include <random>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "reshard/layout/error.h"
#include "reshard/storage/open_store.h"
#include "storage/support/store_servers.h"
#include "support/seed.h"

namespace reshard::storage {
namespace {

struct Piece {
  uint64_t offset;
  uint64_t size;
};

// The object cut into pieces of random sizes, in random order.
std::vector<Piece> random_pieces(uint64_t size, std::mt19937_64& rng) {
  std::vector<Piece> pieces;
  for (uint64_t at = 0; at < size;) {
    const uint64_t take = std::min<uint64_t>(size - at, 1 + rng() % 5000);
    pieces.push_back({at, take});
    at += take;
  }
  std::shuffle(pieces.begin(), pieces.end(), rng);
  return pieces;
}

class PartWriterTest : public ::testing::Test {
 protected:
  Location object_ = Location::parse("memory://part-writer/" + reshard::testing::unique_prefix() + "/file.bin");
  std::shared_ptr<Store> store_ = open_store(object_);
  std::mt19937_64 rng_{reshard::testing::test_seed()};
};

// Two "processes" each own every other part and are handed every byte of the
// object, in random pieces from several threads: each keeps its own parts.
TEST_F(PartWriterTest, WritersOfDisjointPartsTogetherMakeTheObject) {
  const PartLayout layout = PartLayout::plan(23 * 1024 + 77, 1024, store_->part_rules());
  std::string bytes(layout.object_bytes(), '\0');
  for (char& c : bytes) c = static_cast<char>(rng_());
  const auto starter = store_->start_upload(object_, layout, IfExists::kFail);
  std::vector<PartReceipt> all;
  uint64_t uploaded = 0;
  for (uint32_t process = 0; process < 2; ++process) {
    const auto joined = store_->join_upload(object_, layout, starter->handle());
    std::vector<uint32_t> owned;
    for (uint32_t part = process; part < layout.count(); part += 2) owned.push_back(part);
    PartWriter writer(*joined, owned, 3);
    const std::vector<Piece> pieces = random_pieces(bytes.size(), rng_);
    std::vector<std::thread> threads;
    for (size_t t = 0; t < 3; ++t) {
      threads.emplace_back([&, t] {
        for (size_t i = t; i < pieces.size(); i += 3) {
          writer.write_at(pieces[i].offset,
                          std::as_bytes(std::span(bytes.data() + pieces[i].offset, pieces[i].size)));
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
    const std::vector<PartReceipt> receipts = writer.finish();
    EXPECT_EQ(receipts.size(), owned.size());
    uploaded += writer.uploaded_bytes();
    all.insert(all.end(), receipts.begin(), receipts.end());
  }
  EXPECT_EQ(uploaded, bytes.size()) << "each byte is uploaded once, by its part's owner";
  starter->complete(all);
  EXPECT_EQ(store_->read_all(object_, bytes.size()), bytes);
}

TEST_F(PartWriterTest, APartWithMissingBytesIsNamedAtFinish) {
  const PartLayout layout = PartLayout::plan(4096, 1024, store_->part_rules());
  const auto upload = store_->start_upload(object_, layout, IfExists::kFail);
  PartWriter writer(*upload, {0, 1, 2, 3});
  const std::string most(4000, 'x');
  writer.write_at(0, std::as_bytes(std::span(most.data(), most.size())));
  try {
    (void)writer.finish();
    FAIL() << "finish() accepted a part with bytes missing";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_THAT(e.what(), ::testing::HasSubstr("part 3"));
  }
}

TEST_F(PartWriterTest, BytesWrittenTwiceOrPastTheEndAreRefused) {
  const PartLayout layout = PartLayout::plan(4096, 1024, store_->part_rules());
  const auto upload = store_->start_upload(object_, layout, IfExists::kFail);
  PartWriter writer(*upload, {0});
  const std::string some(600, 'x');
  writer.write_at(0, std::as_bytes(std::span(some.data(), some.size())));
  EXPECT_THROW(writer.write_at(100, std::as_bytes(std::span(some.data(), some.size()))), Error);
  EXPECT_THROW(writer.write_at(4000, std::as_bytes(std::span(some.data(), some.size()))), Error);
}

}  // namespace
}  // namespace reshard::storage
