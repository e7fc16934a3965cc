#include "reshard/storage/location.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "reshard/layout/error.h"

namespace reshard::storage {
namespace {

using ::testing::HasSubstr;

std::string refusal(std::string_view text) {
  try {
    (void)Location::parse(text);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
    return e.what();
  }
  ADD_FAILURE() << text << " was accepted";
  return {};
}

TEST(Location, ObjectUrlsSplitIntoBucketAndKeyWithOneSpellingPerFolder) {
  const Location a = Location::parse("s3://bucket/models/llama/");
  EXPECT_EQ(a.scheme(), Scheme::kS3);
  EXPECT_EQ(a.bucket(), "bucket");
  EXPECT_EQ(a.key(), "models/llama");
  EXPECT_EQ(a, Location::parse("s3://bucket//models//llama"));
  EXPECT_EQ(a.str(), "s3://bucket/models/llama");
  EXPECT_EQ(a.child("model.safetensors").str(), "s3://bucket/models/llama/model.safetensors");
  EXPECT_EQ(a.parent().str(), "s3://bucket/models");
  EXPECT_EQ(a.name(), "llama");

  const Location root = Location::parse("gs://b");
  EXPECT_EQ(root.scheme(), Scheme::kGcs);
  EXPECT_EQ(root.key(), "");
  EXPECT_EQ(root.str(), "gs://b");
  EXPECT_EQ(root.child("x/y").str(), "gs://b/x/y");
  EXPECT_EQ(root.parent(), root);
  EXPECT_EQ(Location::parse("S3://bucket/k").scheme(), Scheme::kS3);
}

TEST(Location, LocalPathsStayAsGiven) {
  const Location path = Location::parse("out/model:v2/");
  EXPECT_TRUE(path.is_local());
  EXPECT_EQ(path.local_path(), std::filesystem::path("out/model:v2/"));
  EXPECT_EQ(path.name(), "model:v2");
  EXPECT_EQ(Location(std::filesystem::path("a/b")).child("c").local_path(), std::filesystem::path("a/b/c"));
  EXPECT_EQ(Location::parse("file:///tmp/x").local_path(), std::filesystem::path("/tmp/x"));
  EXPECT_EQ(Location::parse("file://localhost/tmp/x").local_path(), std::filesystem::path("/tmp/x"));
  EXPECT_EQ(Location::parse("file:/tmp/x").local_path(), std::filesystem::path("/tmp/x"));
  EXPECT_THROW((void)Location::parse("s3://b/k").local_path(), Error);
}

TEST(Location, OtherSchemesAndMalformedUrlsAreRefusedByName) {
  EXPECT_THAT(refusal("hf://meta-llama/Llama-3"), HasSubstr("hf://"));
  EXPECT_THAT(refusal("http://example.com/model"), HasSubstr("http://"));
  EXPECT_THAT(refusal("https://example.com/model"), HasSubstr("https://"));
  EXPECT_THAT(refusal("file://otherhost/data"), HasSubstr("otherhost"));
  EXPECT_THAT(refusal("file:relative"), HasSubstr("absolute"));
  EXPECT_THAT(refusal("s3:bucket/key"), HasSubstr("s3://bucket/key"));
  EXPECT_THAT(refusal("gs:/bucket/key"), HasSubstr("did you mean gs://bucket/key?"));
  EXPECT_THAT(refusal("s3://"), HasSubstr("bucket"));
  EXPECT_THAT(refusal("s3:///key"), HasSubstr("bucket"));
  EXPECT_THAT(refusal("gs://bad bucket/x"), HasSubstr("bucket"));
  EXPECT_THAT(refusal(""), HasSubstr("empty"));
}

}  // namespace
}  // namespace reshard::storage
