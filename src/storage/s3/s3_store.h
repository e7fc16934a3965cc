// The S3 protocol driver (AWS and compatible stores): Signature V4, the AWS
// configuration conventions, multipart uploads that many processes fill.
#pragma once

#include <memory>

#include "reshard/storage/open_store.h"
#include "reshard/storage/store.h"

namespace reshard::storage_detail {

// A client for every bucket of the S3 store the environment (and `options`)
// point at.
std::shared_ptr<storage::Store> make_s3_store(const storage::StoreOptions& options);
// The same, asking for `list_page_size` keys a listing request (S3's most is
// 1000): tests use a small page to follow continuation tokens.
std::shared_ptr<storage::Store> make_s3_store(const storage::StoreOptions& options, int list_page_size);

}  // namespace reshard::storage_detail
