// Where the GCS driver's credentials come from, checked end to end: a
// service account's JWT is verified with its public key by a fake token
// endpoint (tests/storage/servers/fake_token_server.py, PyJWT), the bearer
// token it hands out must reach the storage request (a test HTTP server that
// records headers), tokens are cached and refreshed near expiry, and no error
// text holds a token, a key, a secret or an assertion.
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "reshard/layout/error.h"
#include "reshard/storage/storage_error.h"
#include "storage/gcs/gcs_jwt.h"
#include "storage/gcs/gcs_store.h"
#include "storage/http/http_client.h"
#include "storage/support/child_process.h"
#include "storage/support/test_http_server.h"
#include "support/temp_dir.h"

namespace reshard::storage {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using reshard::testing::CannedResponse;
using reshard::testing::ReceivedRequest;
using reshard::testing::TempDir;
using reshard::testing::TestHttpServer;

namespace fs = std::filesystem;

constexpr const char* kEmail = "reshard-test@reshard-test.iam.gserviceaccount.com";
constexpr const char* kKeyId = "0123456789abcdef0123456789abcdef01234567";
constexpr const char* kClientSecret = "client-secret-0f1e2d3c";
constexpr const char* kRefreshToken = "1//refresh-token-9a8b7c6d";

struct RsaKey {
  std::string private_pem;  // PKCS#8
  std::string public_pem;   // SubjectPublicKeyInfo
};

std::string bio_text(BIO* bio) {
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<size_t>(size));
}

RsaKey make_rsa_key() {
  EVP_PKEY_CTX* ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_RSA, nullptr);
  EVP_PKEY* key = nullptr;
  if (ctx == nullptr || EVP_PKEY_keygen_init(ctx) != 1 || EVP_PKEY_CTX_set_rsa_keygen_bits(ctx, 2048) != 1 ||
      EVP_PKEY_keygen(ctx, &key) != 1) {
    throw std::runtime_error("RSA key generation failed");
  }
  EVP_PKEY_CTX_free(ctx);
  BIO* private_bio = BIO_new(BIO_s_mem());
  BIO* public_bio = BIO_new(BIO_s_mem());
  PEM_write_bio_PrivateKey(private_bio, key, nullptr, nullptr, 0, nullptr, nullptr);
  PEM_write_bio_PUBKEY(public_bio, key);
  RsaKey out{bio_text(private_bio), bio_text(public_bio)};
  BIO_free(private_bio);
  BIO_free(public_bio);
  EVP_PKEY_free(key);
  return out;
}

const RsaKey& account_key() {
  static const RsaKey key = make_rsa_key();
  return key;
}

const RsaKey& other_key() {
  static const RsaKey key = make_rsa_key();
  return key;
}

// The part of a PEM key that is secret: a line from the middle of its body.
std::string key_body_line(const RsaKey& key) {
  const size_t start = key.private_pem.find('\n', key.private_pem.size() / 2) + 1;
  return key.private_pem.substr(start, 40);
}

void write_file(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

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

// fake_token_server.py as a child process, stopped by its pid at the end.
class TokenServer {
 public:
  explicit TokenServer(std::vector<std::string> options) {
    const fs::path state = dir_ / "token.json";
    std::vector<std::string> argv{reshard::testing::test_python(),
                                  (reshard::testing::test_servers_dir() / "fake_token_server.py").string(), "--state",
                                  state.string()};
    argv.insert(argv.end(), options.begin(), options.end());
    process_ = std::make_unique<reshard::testing::ChildProcess>(argv, dir_ / "token.log");
    token_uri_ = process_->wait_for_json(state).at("token_uri").get<std::string>();
  }
  // A server that checks service-account assertions against `key`.
  static std::unique_ptr<TokenServer> for_service_account(const RsaKey& key, int expires_in = 3600) {
    static int count = 0;
    const fs::path public_key =
        fs::temp_directory_path() / fmt::format("reshard-gcs-pub-{}-{}.pem", ::getpid(), count++);
    write_file(public_key, key.public_pem);
    auto server = std::make_unique<TokenServer>(std::vector<std::string>{
        "--public-key", public_key.string(), "--client-email", kEmail, "--key-id", kKeyId, "--expires-in",
        std::to_string(expires_in)});
    fs::remove(public_key);
    return server;
  }
  static std::unique_ptr<TokenServer> for_authorized_user() {
    return std::make_unique<TokenServer>(std::vector<std::string>{
        "--client-id", "reshard-client.apps.googleusercontent.com", "--client-secret", kClientSecret,
        "--refresh-token", kRefreshToken});
  }

  const std::string& token_uri() const { return token_uri_; }
  nlohmann::json log() const {
    const std::string url = token_uri_.substr(0, token_uri_.rfind('/')) + "/__log__";
    storage_detail::HttpClient http;
    storage_detail::HttpRequest request;
    request.url = url;
    return nlohmann::json::parse(http.send(request).body);
  }

 private:
  TempDir dir_;
  std::unique_ptr<reshard::testing::ChildProcess> process_;
  std::string token_uri_;
};

// A GCS endpoint that records what it is sent and answers every object
// metadata request with a small object (or with the status `refuse` picks).
class FakeStorage {
 public:
  explicit FakeStorage(std::function<int(const ReceivedRequest&)> refuse = nullptr)
      : server_([refuse](const ReceivedRequest& request) {
          const int status = refuse ? refuse(request) : 200;
          if (status != 200) {
            return CannedResponse{status, fmt::format(R"({{"error":{{"code":{},"message":"refused by the test",)"
                                                      R"("errors":[{{"reason":"forbidden"}}]}}}})",
                                                      status)};
          }
          return CannedResponse{200, R"({"name":"obj","size":"3","generation":"7"})"};
        }) {}

  const TestHttpServer& server() const { return server_; }
  std::vector<std::string> authorizations() const {
    std::vector<std::string> out;
    for (const ReceivedRequest& request : server_.requests()) out.push_back(request.header("Authorization"));
    return out;
  }

 private:
  TestHttpServer server_;
};

class GcsCredentialsTest : public ::testing::Test {
 protected:
  // Every variable the credential chain reads, restored after each test.
  static constexpr const char* kVariables[] = {"GOOGLE_APPLICATION_CREDENTIALS", "CLOUDSDK_CONFIG", "HOME",
                                               "GCE_METADATA_HOST", "STORAGE_EMULATOR_HOST"};

  void SetUp() override {
    for (const char* name : kVariables) {
      const char* value = std::getenv(name);
      saved_.emplace_back(name, value == nullptr ? std::nullopt : std::optional<std::string>(value));
      ::unsetenv(name);
    }
    // A home with no gcloud files, and a metadata server that is not there.
    ::setenv("HOME", (home_.path() / "home").c_str(), 1);
    ::setenv("GCE_METADATA_HOST", fmt::format("127.0.0.1:{}", closed_port()).c_str(), 1);
  }

  void TearDown() override {
    for (const auto& [name, value] : saved_) {
      if (value) {
        ::setenv(name, value->c_str(), 1);
      } else {
        ::unsetenv(name);
      }
    }
  }

  static std::shared_ptr<Store> store_at(const std::string& endpoint,
                                         std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    StoreOptions options;
    options.gcs_endpoint = endpoint;
    options.timeout = timeout;
    return storage_detail::make_gcs_store(options);
  }

  static const Location& object() {
    static const Location where = Location::object(Scheme::kGcs, "bkt", "obj");
    return where;
  }

  fs::path service_account_file(const RsaKey& key, const std::string& token_uri) const {
    const fs::path path = home_.path() / "keys" / "service-account.json";
    const nlohmann::json json = {{"type", "service_account"},
                                 {"project_id", "reshard-test"},
                                 {"private_key_id", kKeyId},
                                 {"private_key", key.private_pem},
                                 {"client_email", kEmail},
                                 {"client_id", "1234567890"},
                                 {"token_uri", token_uri}};
    write_file(path, json.dump(2));
    return path;
  }

  static nlohmann::json authorized_user(const std::string& token_uri, const std::string& secret = kClientSecret) {
    return {{"type", "authorized_user"},
            {"client_id", "reshard-client.apps.googleusercontent.com"},
            {"client_secret", secret},
            {"refresh_token", kRefreshToken},
            {"token_uri", token_uri}};
  }

  // No secret of any kind in an error's text.
  static void expect_no_secrets(const Error& error, const std::vector<std::string>& tokens = {}) {
    const std::string text = error.what();
    EXPECT_THAT(text, Not(HasSubstr("PRIVATE KEY")));
    EXPECT_THAT(text, Not(HasSubstr(key_body_line(account_key()))));
    EXPECT_THAT(text, Not(HasSubstr(key_body_line(other_key()))));
    EXPECT_THAT(text, Not(HasSubstr("eyJ")));  // every JWT starts so: base64url of '{"'
    EXPECT_THAT(text, Not(HasSubstr(kClientSecret)));
    EXPECT_THAT(text, Not(HasSubstr(kRefreshToken)));
    EXPECT_THAT(text, Not(HasSubstr("ya29.")));
    for (const std::string& token : tokens) EXPECT_THAT(text, Not(HasSubstr(token)));
  }

  TempDir home_;
  std::vector<std::pair<const char*, std::optional<std::string>>> saved_;
};

TEST_F(GcsCredentialsTest, AServiceAccountsVerifiedJwtBuysTheTokenThatTheStorageRequestCarries) {
  const auto tokens = TokenServer::for_service_account(account_key());
  ::setenv("GOOGLE_APPLICATION_CREDENTIALS", service_account_file(account_key(), tokens->token_uri()).c_str(), 1);
  FakeStorage storage;
  const auto store = store_at(storage.server().url());
  ASSERT_EQ(store->stat(object())->size, 3u);
  ASSERT_EQ(store->stat(object())->version, "7");

  const nlohmann::json log = tokens->log();
  ASSERT_EQ(log.size(), 1u) << "one token, cached for the second request: " << log.dump();
  EXPECT_TRUE(log[0].at("ok").get<bool>()) << log[0].dump();
  EXPECT_EQ(log[0].at("grant_type"), "urn:ietf:params:oauth:grant-type:jwt-bearer");
  EXPECT_EQ(log[0].at("header").at("kid"), kKeyId);
  EXPECT_EQ(log[0].at("claims").at("scope"), "https://www.googleapis.com/auth/devstorage.read_write");
  EXPECT_EQ(log[0].at("claims").at("aud"), tokens->token_uri());
  EXPECT_EQ(log[0].at("content_type"), "application/x-www-form-urlencoded");
  const std::string bearer = "Bearer " + log[0].at("access_token").get<std::string>();
  EXPECT_THAT(storage.authorizations(), ::testing::ElementsAre(bearer, bearer));
}

TEST_F(GcsCredentialsTest, ATokenNearItsExpiryIsRefreshedBeforeTheNextRequest) {
  // 100 s of life is inside the refresh margin: every request needs a new token.
  const auto tokens = TokenServer::for_service_account(account_key(), 100);
  ::setenv("GOOGLE_APPLICATION_CREDENTIALS", service_account_file(account_key(), tokens->token_uri()).c_str(), 1);
  FakeStorage storage;
  const auto store = store_at(storage.server().url());
  store->stat(object());
  store->stat(object());
  const nlohmann::json log = tokens->log();
  ASSERT_EQ(log.size(), 2u);
  EXPECT_THAT(storage.authorizations(),
              ::testing::ElementsAre("Bearer " + log[0].at("access_token").get<std::string>(),
                                     "Bearer " + log[1].at("access_token").get<std::string>()));
  EXPECT_NE(log[0].at("access_token"), log[1].at("access_token"));
}

TEST_F(GcsCredentialsTest, ATokenTheStoreRejectsWith401IsReplacedOnce) {
  const auto tokens = TokenServer::for_service_account(account_key());
  ::setenv("GOOGLE_APPLICATION_CREDENTIALS", service_account_file(account_key(), tokens->token_uri()).c_str(), 1);
  int seen = 0;
  FakeStorage storage([&seen](const ReceivedRequest&) { return seen++ == 0 ? 401 : 200; });
  const auto store = store_at(storage.server().url());
  EXPECT_EQ(store->stat(object())->size, 3u);
  const nlohmann::json log = tokens->log();
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(storage.authorizations().back(), "Bearer " + log[1].at("access_token").get<std::string>());
}

TEST_F(GcsCredentialsTest, AnAssertionSignedWithAnotherKeyIsRefusedAndNothingSecretIsShown) {
  const auto tokens = TokenServer::for_service_account(account_key());
  const fs::path file = service_account_file(other_key(), tokens->token_uri());
  ::setenv("GOOGLE_APPLICATION_CREDENTIALS", file.c_str(), 1);
  FakeStorage storage;
  const Error error = error_of([&] { store_at(storage.server().url())->stat(object()); });
  EXPECT_EQ(error.kind(), kAccessDenied) << error.what();
  EXPECT_THAT(error.what(), HasSubstr(file.string()));
  EXPECT_THAT(error.what(), HasSubstr("invalid_grant"));
  expect_no_secrets(error);
  EXPECT_TRUE(storage.authorizations().empty()) << "no request without a token";
  EXPECT_FALSE(tokens->log().at(0).at("ok").get<bool>());
}

TEST_F(GcsCredentialsTest, A403NamesWhereTheCredentialsCameFromButNotTheToken) {
  const auto tokens = TokenServer::for_service_account(account_key());
  const fs::path file = service_account_file(account_key(), tokens->token_uri());
  ::setenv("GOOGLE_APPLICATION_CREDENTIALS", file.c_str(), 1);
  FakeStorage storage([](const ReceivedRequest&) { return 403; });
  const Error error = error_of([&] { store_at(storage.server().url())->stat(object()); });
  EXPECT_EQ(error.kind(), kAccessDenied);
  EXPECT_THAT(error.what(), HasSubstr("gs://bkt/obj"));
  EXPECT_THAT(error.what(), HasSubstr("service account key file " + file.string()));
  EXPECT_THAT(error.what(), HasSubstr("GOOGLE_APPLICATION_CREDENTIALS"));
  expect_no_secrets(error, {tokens->log().at(0).at("access_token").get<std::string>()});
}

TEST_F(GcsCredentialsTest, AnAuthorizedUserFileRefreshesItsToken) {
  const auto tokens = TokenServer::for_authorized_user();
  const fs::path file = home_.path() / "user.json";
  write_file(file, authorized_user(tokens->token_uri()).dump());
  ::setenv("GOOGLE_APPLICATION_CREDENTIALS", file.c_str(), 1);
  FakeStorage storage;
  store_at(storage.server().url())->stat(object());
  const nlohmann::json log = tokens->log();
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].at("grant_type"), "refresh_token");
  EXPECT_TRUE(log[0].at("ok").get<bool>());
  EXPECT_THAT(storage.authorizations(),
              ::testing::ElementsAre("Bearer " + log[0].at("access_token").get<std::string>()));

  // A wrong secret: refused, and neither the secret nor the refresh token shows.
  write_file(file, authorized_user(tokens->token_uri(), "wrong-secret-55aa").dump());
  const Error error = error_of([&] { store_at(storage.server().url())->stat(object()); });
  EXPECT_EQ(error.kind(), kAccessDenied);
  EXPECT_THAT(error.what(), HasSubstr(file.string()));
  EXPECT_THAT(error.what(), Not(HasSubstr("wrong-secret-55aa")));
  expect_no_secrets(error);
}

TEST_F(GcsCredentialsTest, GcloudsApplicationDefaultCredentialsAreFoundUnderCloudsdkConfigAndHome) {
  const auto tokens = TokenServer::for_authorized_user();
  FakeStorage storage([](const ReceivedRequest&) { return 403; });  // to see the source named
  const fs::path in_home = home_.path() / "home" / ".config" / "gcloud" / "application_default_credentials.json";
  write_file(in_home, authorized_user(tokens->token_uri()).dump());
  Error error = error_of([&] { store_at(storage.server().url())->stat(object()); });
  EXPECT_EQ(error.kind(), kAccessDenied);
  EXPECT_THAT(error.what(), HasSubstr(in_home.string()));
  EXPECT_THAT(error.what(), HasSubstr("gcloud"));

  const fs::path in_config = home_.path() / "gcloud-config" / "application_default_credentials.json";
  write_file(in_config, authorized_user(tokens->token_uri()).dump());
  ::setenv("CLOUDSDK_CONFIG", in_config.parent_path().c_str(), 1);
  error = error_of([&] { store_at(storage.server().url())->stat(object()); });
  EXPECT_THAT(error.what(), HasSubstr(in_config.string()));
  EXPECT_EQ(tokens->log().size(), 2u);
  const std::vector<std::string> seen = storage.authorizations();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1], "Bearer " + tokens->log().at(1).at("access_token").get<std::string>());
  // Read, never written.
  EXPECT_EQ(nlohmann::json::parse(std::ifstream(in_config)), authorized_user(tokens->token_uri()));
}

TEST_F(GcsCredentialsTest, TheMetadataServerIsAskedWithMetadataFlavor) {
  TestHttpServer metadata([](const ReceivedRequest& request) {
    if (request.header("Metadata-Flavor") != "Google" ||
        request.target != "/computeMetadata/v1/instance/service-accounts/default/token") {
      return CannedResponse{403, R"({"error":"no flavor"})"};
    }
    return CannedResponse{200, R"({"access_token":"ya29.metadata-token","expires_in":3599,"token_type":"Bearer"})"};
  });
  ::setenv("GCE_METADATA_HOST", metadata.host_port().c_str(), 1);
  FakeStorage storage;
  const auto store = store_at(storage.server().url());
  store->stat(object());
  store->stat(object());
  EXPECT_EQ(metadata.requests().size(), 1u);
  EXPECT_THAT(storage.authorizations(),
              ::testing::ElementsAre("Bearer ya29.metadata-token", "Bearer ya29.metadata-token"));
}

TEST_F(GcsCredentialsTest, WithNoSourceTheErrorListsEverySourceTried) {
  FakeStorage storage;
  const Error error = error_of([&] { store_at(storage.server().url(), std::chrono::seconds(1))->stat(object()); });
  EXPECT_EQ(error.kind(), kAccessDenied) << error.what();
  EXPECT_THAT(error.what(), HasSubstr("GOOGLE_APPLICATION_CREDENTIALS"));
  EXPECT_THAT(error.what(), HasSubstr("application_default_credentials.json"));
  EXPECT_THAT(error.what(), HasSubstr("metadata server"));
  EXPECT_TRUE(storage.authorizations().empty());
}

TEST_F(GcsCredentialsTest, StorageEmulatorHostMeansNoCredentials) {
  FakeStorage storage;
  // A named file that would fail is never read when the emulator is set.
  ::setenv("GOOGLE_APPLICATION_CREDENTIALS", "/nonexistent/key.json", 1);
  ::setenv("STORAGE_EMULATOR_HOST", storage.server().host_port().c_str(), 1);  // host:port, as gcloud writes it
  StoreOptions options;
  options.timeout = std::chrono::seconds(5);
  EXPECT_EQ(storage_detail::make_gcs_store(options)->stat(object())->size, 3u);
  EXPECT_THAT(storage.authorizations(), ::testing::ElementsAre(""));
}

TEST_F(GcsCredentialsTest, BrokenCredentialFilesAreConfigErrorsThatShowNoContent) {
  const fs::path file = home_.path() / "broken.json";
  write_file(file, R"({"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----\nSECRETSTUFF)");
  ::setenv("GOOGLE_APPLICATION_CREDENTIALS", file.c_str(), 1);
  Error error = error_of([&] { store_at("http://127.0.0.1:1"); });
  EXPECT_EQ(error.code(), ErrorCode::kInvalidConfig);
  EXPECT_THAT(error.what(), HasSubstr(file.string()));
  EXPECT_THAT(error.what(), Not(HasSubstr("SECRETSTUFF")));

  write_file(file, nlohmann::json{{"type", "service_account"}, {"client_email", kEmail}}.dump());
  error = error_of([&] { store_at("http://127.0.0.1:1"); });
  EXPECT_EQ(error.code(), ErrorCode::kInvalidConfig);
  EXPECT_THAT(error.what(), HasSubstr("private_key"));

  ::setenv("GOOGLE_APPLICATION_CREDENTIALS", (home_.path() / "missing.json").c_str(), 1);
  EXPECT_EQ(error_of([&] { store_at("http://127.0.0.1:1"); }).code(), ErrorCode::kInvalidConfig);

  // A key that is not a key: refused when signing, without showing it.
  write_file(file, nlohmann::json{{"type", "service_account"},
                                  {"client_email", kEmail},
                                  {"private_key", "-----BEGIN PRIVATE KEY-----\nNOTAKEY\n-----END PRIVATE KEY-----\n"},
                                  {"token_uri", "http://127.0.0.1:1/token"}}
                        .dump());
  ::setenv("GOOGLE_APPLICATION_CREDENTIALS", file.c_str(), 1);
  error = error_of([&] { store_at("http://127.0.0.1:1")->stat(object()); });
  EXPECT_EQ(error.code(), ErrorCode::kInvalidConfig);
  EXPECT_THAT(error.what(), Not(HasSubstr("NOTAKEY")));
}

TEST(GcsJwt, Base64UrlHasNoPaddingAndTheUrlAlphabet) {
  EXPECT_EQ(storage_detail::base64url(""), "");
  EXPECT_EQ(storage_detail::base64url("f"), "Zg");
  EXPECT_EQ(storage_detail::base64url("fo"), "Zm8");
  EXPECT_EQ(storage_detail::base64url("foo"), "Zm9v");
  EXPECT_EQ(storage_detail::base64url("\xfb\xff\xbf"), "-_-_");
}

}  // namespace
}  // namespace reshard::storage
