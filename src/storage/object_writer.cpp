#include "reshard/storage/object_writer.h"

#include <fmt/format.h>

#include "reshard/layout/error.h"
#include "reshard/storage/open_store.h"
#include "reshard/storage/pending_uploads.h"

namespace reshard::storage {
namespace {

// A local file takes bytes at any offset: one part, written as they come. An
// object is cut as its store wants, each part uploaded once it is full.
PartLayout layout_for(const Location& destination, const Store& store, uint64_t size, uint64_t part_bytes) {
  if (destination.is_local()) return PartLayout::single(size);
  try {
    return PartLayout::plan(size, part_bytes, store.part_rules());
  } catch (const Error& e) {
    throw e.with_context(destination.str());
  }
}

std::vector<uint32_t> every_part(const PartLayout& layout) {
  std::vector<uint32_t> parts(layout.count());
  for (uint32_t part = 0; part < layout.count(); ++part) parts[part] = part;
  return parts;
}

}  // namespace

ObjectWriter::ObjectWriter(const Location& destination, uint64_t size, const UploadOptions& options,
                           IfExists if_exists)
    : destination_(destination), size_(size), store_(open_store(destination)) {
  const PartLayout layout = layout_for(destination_, *store_, size, options.part_bytes);
  store_->abort_stale_uploads(destination_);
  upload_ = store_->start_upload(destination_, layout, if_exists);
  try {
    pending_ = remember_pending_upload(store_, *upload_);
    if (!upload_->writes_at_any_offset()) {
      parts_ = std::make_unique<PartWriter>(*upload_, every_part(layout), options.parts_in_flight);
    }
  } catch (...) {
    abort();  // no destructor runs for an object whose constructor threw
    throw;
  }
}

ObjectWriter::~ObjectWriter() { abort(); }

void ObjectWriter::write(std::span<const std::byte> bytes) {
  if (done_) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: written to after it was committed or aborted", destination_.str()));
  }
  if (bytes.size() > size_ - written_) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: {} more bytes given, but only {} of its {} are left",
                                                         destination_.str(), bytes.size(), size_ - written_, size_));
  }
  if (parts_) {
    parts_->write_at(written_, bytes);
  } else {
    upload_->write_at(written_, bytes);
  }
  written_ += bytes.size();
}

void ObjectWriter::commit() {
  if (done_) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: the object was already committed or aborted", destination_.str()));
  }
  if (written_ != size_) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: cannot commit after {} of {} bytes", destination_.str(), written_, size_));
  }
  try {
    std::vector<PartReceipt> receipts = parts_ ? parts_->finish() : std::vector<PartReceipt>{{0, ""}};
    upload_->complete(std::move(receipts));
  } catch (...) {
    abort();
    throw;
  }
  done_ = true;
  forget_pending_upload(*pending_);
  pending_.reset();
}

void ObjectWriter::abort() noexcept {
  parts_.reset();  // waits for the parts in flight: none may land after the abort
  if (!done_ && upload_) upload_->abort();
  done_ = true;
  if (pending_) forget_pending_upload(*pending_);
  pending_.reset();
}

}  // namespace reshard::storage
