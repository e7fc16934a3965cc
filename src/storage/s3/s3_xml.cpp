#include "storage/s3/s3_xml.h"

#include <tinyxml2.h>

#include <charconv>

#include <fmt/format.h>

#include "reshard/layout/error.h"
#include "reshard/storage/storage_error.h"

namespace reshard::storage_detail {
namespace {

using tinyxml2::XMLDocument;
using tinyxml2::XMLElement;

// Parses an answer the store sent with a success status; Error(kStoreError)
// when it is not XML with a root element named `root`.
const XMLElement& parse_root(XMLDocument& document, std::string_view body, std::string_view root) {
  if (document.Parse(body.data(), body.size()) != tinyxml2::XML_SUCCESS || document.RootElement() == nullptr ||
      std::string_view(document.RootElement()->Name()) != root) {
    throw Error(storage::kStoreError, fmt::format("the S3 store's answer is not a <{}> document", root));
  }
  return *document.RootElement();
}

std::string text_of(const XMLElement& parent, const char* name) {
  const XMLElement* child = parent.FirstChildElement(name);
  if (child == nullptr || child->GetText() == nullptr) return {};
  return child->GetText();
}

uint64_t number_of(const XMLElement& parent, const char* name) {
  const std::string text = text_of(parent, name);
  uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) {
    throw Error(storage::kStoreError, fmt::format("the S3 store's answer has {:?} for <{}>", text, name));
  }
  return value;
}

std::string xml_escape(std::string_view text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::optional<S3ErrorBody> parse_s3_error(std::string_view body) {
  XMLDocument document;
  if (body.empty() || document.Parse(body.data(), body.size()) != tinyxml2::XML_SUCCESS) return std::nullopt;
  const XMLElement* root = document.RootElement();
  if (root == nullptr || std::string_view(root->Name()) != "Error") return std::nullopt;
  return S3ErrorBody{text_of(*root, "Code"), text_of(*root, "Message")};
}

std::string parse_upload_id(std::string_view body) {
  XMLDocument document;
  return text_of(parse_root(document, body, "InitiateMultipartUploadResult"), "UploadId");
}

ObjectListPage parse_list_objects(std::string_view body) {
  XMLDocument document;
  const XMLElement& root = parse_root(document, body, "ListBucketResult");
  const bool encoded = text_of(root, "EncodingType") == "url";
  ObjectListPage page;
  for (const XMLElement* item = root.FirstChildElement("Contents"); item != nullptr;
       item = item->NextSiblingElement("Contents")) {
    const std::string key = text_of(*item, "Key");
    page.objects.push_back({encoded ? form_decode(key) : key, number_of(*item, "Size")});
  }
  if (text_of(root, "IsTruncated") == "true") {
    page.next_continuation_token = text_of(root, "NextContinuationToken");
    if (page.next_continuation_token->empty()) {
      throw Error(storage::kStoreError, "the S3 store's listing is truncated but has no NextContinuationToken");
    }
  }
  return page;
}

UploadListPage parse_list_uploads(std::string_view body) {
  XMLDocument document;
  const XMLElement& root = parse_root(document, body, "ListMultipartUploadsResult");
  UploadListPage page;
  for (const XMLElement* item = root.FirstChildElement("Upload"); item != nullptr;
       item = item->NextSiblingElement("Upload")) {
    page.uploads.push_back({text_of(*item, "Key"), text_of(*item, "UploadId")});
  }
  page.truncated = text_of(root, "IsTruncated") == "true";
  page.next_key_marker = text_of(root, "NextKeyMarker");
  page.next_upload_id_marker = text_of(root, "NextUploadIdMarker");
  return page;
}

std::string complete_upload_body(const std::vector<storage::PartReceipt>& receipts) {
  std::string body = "<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">";
  for (const storage::PartReceipt& receipt : receipts) {
    body += fmt::format("<Part><PartNumber>{}</PartNumber><ETag>{}</ETag></Part>", uint64_t{receipt.index} + 1,
                        xml_escape(receipt.tag));
  }
  body += "</CompleteMultipartUpload>";
  return body;
}

std::string form_decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '+') {
      out.push_back(' ');
    } else if (text[i] == '%' && i + 2 < text.size() && hex_value(text[i + 1]) >= 0 && hex_value(text[i + 2]) >= 0) {
      out.push_back(static_cast<char>(hex_value(text[i + 1]) * 16 + hex_value(text[i + 2])));
      i += 2;
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

}  // namespace reshard::storage_detail
