// Signature V4 for S3 against AWS's published examples ("Signature
// Calculations for the Authorization Header", examplebucket, 2013-05-24) and
// the canonicalisation rules' edge cases. sigv4_vs_botocore.py compares with
// botocore on random requests.
#include "storage/s3/sigv4.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "reshard/layout/error.h"
#include "storage/s3/s3_endpoint.h"

namespace reshard::storage_detail {
namespace {

const AwsCredentials kExample{"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "", "the example",
                              std::nullopt};
const std::string kEmptySha256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

// 2013-05-24T00:00:00Z.
std::chrono::system_clock::time_point example_time() {
  return std::chrono::system_clock::time_point(std::chrono::seconds(1369353600));
}

std::string header(const Headers& headers, std::string_view name) {
  for (const auto& [key, value] : headers) {
    if (key == name) return value;
  }
  return "<none>";
}

std::string signature_of(const Headers& signed_headers) {
  const std::string authorization = header(signed_headers, "authorization");
  const size_t at = authorization.find("Signature=");
  return at == std::string::npos ? "" : authorization.substr(at + 10);
}

TEST(S3SigV4, AwsGetObjectExample) {
  const SigningInput request{
      "GET", "/test.txt", {}, {{"Host", "examplebucket.s3.amazonaws.com"}, {"Range", "bytes=0-9"}}, kEmptySha256};
  const Headers added = sign_v4(request, kExample, "us-east-1", example_time());
  EXPECT_EQ(header(added, "authorization"),
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
            "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
            "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
  EXPECT_EQ(header(added, "x-amz-date"), "20130524T000000Z");
  EXPECT_EQ(header(added, "x-amz-content-sha256"), kEmptySha256);
  EXPECT_EQ(header(added, "x-amz-security-token"), "<none>");

  // The canonical request as the documentation prints it.
  SigningInput complete = request;
  complete.headers.emplace_back("x-amz-content-sha256", kEmptySha256);
  complete.headers.emplace_back("x-amz-date", "20130524T000000Z");
  EXPECT_EQ(canonical_request(complete),
            "GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\n"
            "x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n"
            "x-amz-date:20130524T000000Z\n\nhost;range;x-amz-content-sha256;x-amz-date\n"
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(S3SigV4, AwsPutObjectExample) {
  const std::string body = "Welcome to Amazon S3.";
  EXPECT_EQ(sha256_hex(body), "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072");
  // The key "test$file.text": '$' is percent-encoded in the path.
  EXPECT_EQ(s3_uri_path("test$file.text"), "test%24file.text");
  const SigningInput request{"PUT",
                             "/" + s3_uri_path("test$file.text"),
                             {},
                             {{"Host", "examplebucket.s3.amazonaws.com"},
                              {"Date", "Fri, 24 May 2013 00:00:00 GMT"},
                              {"x-amz-storage-class", "REDUCED_REDUNDANCY"}},
                             sha256_hex(body)};
  const Headers added = sign_v4(request, kExample, "us-east-1", example_time());
  EXPECT_NE(header(added, "authorization")
                .find("SignedHeaders=date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class,"),
            std::string::npos);
  EXPECT_EQ(signature_of(added), "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd");
}

TEST(S3SigV4, AwsGetBucketLifecycleExample) {
  const SigningInput request{
      "GET", "/", {{"lifecycle", ""}}, {{"Host", "examplebucket.s3.amazonaws.com"}}, kEmptySha256};
  EXPECT_EQ(signature_of(sign_v4(request, kExample, "us-east-1", example_time())),
            "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543");
}

TEST(S3SigV4, AwsListObjectsExample) {
  // Given out of order: the canonical query sorts them.
  const SigningInput request{
      "GET", "/", {{"prefix", "J"}, {"max-keys", "2"}}, {{"Host", "examplebucket.s3.amazonaws.com"}}, kEmptySha256};
  EXPECT_EQ(canonical_query(request.query), "max-keys=2&prefix=J");
  EXPECT_EQ(signature_of(sign_v4(request, kExample, "us-east-1", example_time())),
            "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");
}

TEST(S3SigV4, KeysAreEncodedOnceKeepingSlashes) {
  EXPECT_EQ(s3_uri_path("dir/a b+c=d~e"), "dir/a%20b%2Bc%3Dd~e");
  EXPECT_EQ(s3_uri_path("ünï/日本"), "%C3%BCn%C3%AF/%E6%97%A5%E6%9C%AC");
  // Already-encoded text is encoded again (S3 takes the key literally), and
  // dot segments and doubled slashes are kept as they are.
  EXPECT_EQ(s3_uri_path("100%/a%20b"), "100%25/a%2520b");
  EXPECT_EQ(s3_uri_path("a//b/./c/../d"), "a//b/./c/../d");
  EXPECT_EQ(s3_uri_path("!*'();:@&=$,?#[]"), "%21%2A%27%28%29%3B%3A%40%26%3D%24%2C%3F%23%5B%5D");
  EXPECT_EQ(s3_uri_path("AZaz09-_.~"), "AZaz09-_.~");
}

TEST(S3SigV4, QueryIsEncodedAndSortedByEncodedName) {
  EXPECT_EQ(canonical_query({{"uploads", ""}}), "uploads=");
  EXPECT_EQ(canonical_query({{"prefix", "a b/c+d=e~"}, {"list-type", "2"}, {"continuation-token", "x/y=="}}),
            "continuation-token=x%2Fy%3D%3D&list-type=2&prefix=a%20b%2Fc%2Bd%3De~");
  // Repeated names sort by value; '[' sorts by its encoding ("%5B" < "A").
  EXPECT_EQ(canonical_query({{"k", "b"}, {"k", "a"}, {"A", "1"}, {"[", "2"}}), "%5B=2&A=1&k=a&k=b");
  EXPECT_EQ(canonical_query({{"name", "ü"}}), "name=%C3%BC");
  EXPECT_EQ(canonical_query({}), "");
}

TEST(S3SigV4, HeadersAreLowerCasedTrimmedSortedAndJoined) {
  const SigningInput request{"PUT",
                             "/b/k",
                             {},
                             {{"X-Amz-Meta-B", "  two   spaces\tand tab  "},
                              {"host", "h"},
                              {"x-amz-meta-a", "1"},
                              {"X-AMZ-META-A", "2"}},
                             kEmptySha256};
  EXPECT_EQ(canonical_request(request),
            "PUT\n/b/k\n\nhost:h\nx-amz-meta-a:1,2\nx-amz-meta-b:two spaces and tab\n\n"
            "host;x-amz-meta-a;x-amz-meta-b\n" + kEmptySha256);
}

TEST(S3SigV4, SessionTokenIsSentAndSigned) {
  AwsCredentials with_token = kExample;
  with_token.session_token = "FwoGZXIvYXdzEXAMPLETOKEN";
  const SigningInput request{"GET", "/test.txt", {}, {{"Host", "examplebucket.s3.amazonaws.com"}}, kEmptySha256};
  const Headers added = sign_v4(request, with_token, "us-east-1", example_time());
  EXPECT_EQ(header(added, "x-amz-security-token"), "FwoGZXIvYXdzEXAMPLETOKEN");
  EXPECT_NE(
      header(added, "authorization").find("SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-security-token,"),
      std::string::npos);
  EXPECT_NE(signature_of(added), signature_of(sign_v4(request, kExample, "us-east-1", example_time())));
}

TEST(S3SigV4, SigningHeadersGivenAreReplaced) {
  const SigningInput plain{"GET", "/test.txt", {}, {{"Host", "examplebucket.s3.amazonaws.com"}, {"Range", "bytes=0-9"}},
                           kEmptySha256};
  SigningInput stale = plain;
  stale.headers.emplace_back("X-Amz-Date", "19990101T000000Z");
  stale.headers.emplace_back("Authorization", "AWS4-HMAC-SHA256 old");
  EXPECT_EQ(sign_v4(stale, kExample, "us-east-1", example_time()),
            sign_v4(plain, kExample, "us-east-1", example_time()));
}

TEST(S3SigV4, ScopeHasTheDateAndRegion) {
  const SigningInput request{"GET", "/k", {}, {{"host", "h"}}, kEmptySha256};
  const auto when = std::chrono::system_clock::time_point(std::chrono::seconds(1700000000));  // 2023-11-14T22:13:20Z
  const Headers added = sign_v4(request, kExample, "eu-west-2", when);
  EXPECT_EQ(header(added, "x-amz-date"), "20231114T221320Z");
  EXPECT_NE(header(added, "authorization").find("Credential=AKIAIOSFODNN7EXAMPLE/20231114/eu-west-2/s3/aws4_request,"),
            std::string::npos);
}

TEST(S3SigV4, TargetsArePathOrVirtualHosted) {
  S3Endpoint endpoint = parse_s3_endpoint("http://127.0.0.1:8333");
  S3Target target = s3_target(endpoint, "bucket", "a b/c");
  EXPECT_EQ(target.url_without_query, "http://127.0.0.1:8333/bucket/a%20b/c");
  EXPECT_EQ(target.canonical_uri, "/bucket/a%20b/c");
  EXPECT_EQ(target.host, "127.0.0.1:8333");

  endpoint = parse_s3_endpoint("https://S3.eu-west-2.amazonaws.com:443");
  endpoint.path_style = false;
  target = s3_target(endpoint, "bucket", "k");
  EXPECT_EQ(target.url_without_query, "https://bucket.S3.eu-west-2.amazonaws.com:443/k");
  EXPECT_EQ(target.host, "bucket.s3.eu-west-2.amazonaws.com");
  EXPECT_EQ(target.canonical_uri, "/k");
  EXPECT_EQ(s3_target(endpoint, "bucket", "").canonical_uri, "/");
  // A bucket that is no DNS label stays in the path.
  EXPECT_EQ(s3_target(endpoint, "my.bucket", "k").canonical_uri, "/my.bucket/k");

  endpoint = parse_s3_endpoint("http://host/base/");
  EXPECT_EQ(s3_target(endpoint, "b", "k").url_without_query, "http://host/base/b/k");
  EXPECT_THROW(parse_s3_endpoint("127.0.0.1:8333"), Error);
  EXPECT_THROW(parse_s3_endpoint("ftp://host"), Error);
}

}  // namespace
}  // namespace reshard::storage_detail
