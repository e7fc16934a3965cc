#include "pipelines/export/export_objects.h"

#include <algorithm>
#include <sstream>

#include <fmt/format.h>

#include "reshard/layout/error.h"
#include "reshard/storage/open_store.h"
#include "reshard/storage/pending_uploads.h"

namespace reshard::pipelines_detail {
namespace {

std::vector<std::string> lines_of(std::string_view text) {
  std::vector<std::string> lines;
  std::istringstream in{std::string(text)};
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace

ExportObjects::ExportObjects(storage::Location out, const OutputFiles& files, uint64_t part_bytes, bool replace,
                             uint32_t parts_in_flight, bool whole_folder)
    : out_(std::move(out)),
      store_(storage::open_store(out_)),
      files_(files),
      replace_(replace),
      parts_in_flight_(parts_in_flight),
      whole_folder_(whole_folder),
      layouts_(plan_parts(out_, files, part_bytes)) {}

std::vector<storage::PartLayout> ExportObjects::plan_parts(const storage::Location& out, const OutputFiles& files,
                                                          uint64_t part_bytes) {
  const storage::PartRules rules = storage::open_store(out)->part_rules();
  std::vector<storage::PartLayout> layouts;
  for (const auto& [name, layout] : files) {
    try {
      layouts.push_back(storage::PartLayout::plan(layout.file_size(), part_bytes, rules));
    } catch (const Error& e) {
      throw e.with_context(out.child(name).str());
    }
  }
  return layouts;
}

ExportObjects::~ExportObjects() {
  writers_.clear();
  if (!committed_) {
    for (const auto& upload : uploads_) upload->abort();
  }
  for (const uint64_t id : pending_) storage::forget_pending_upload(id);
}

std::string ExportObjects::create() {
  if (!replace_ && whole_folder_ && !store_->list(out_).empty()) {
    throw Error(ErrorCode::kAlreadyExists, fmt::format("{}: already exists and is not empty", out_.str()));
  }
  for (const auto& file : files_) {
    if (!replace_ && !whole_folder_ && store_->stat(out_.child(file.first))) {
      throw Error(ErrorCode::kAlreadyExists, fmt::format("{}: already exists", out_.child(file.first).str()));
    }
  }
  std::string handles;
  for (size_t f = 0; f < files_.size(); ++f) {
    const storage::Location file = out_.child(files_[f].first);
    store_->abort_stale_uploads(file);
    uploads_.push_back(store_->start_upload(file, layouts_[f], storage::IfExists::kReplace));
    pending_.push_back(storage::remember_pending_upload(store_, *uploads_.back()));
    handles += uploads_.back()->handle();
    handles += '\n';
  }
  return handles;
}

void ExportObjects::join(std::string_view handles) {
  const std::vector<std::string> lines = lines_of(handles);
  if (lines.size() != files_.size()) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: {} upload handles for {} files: the processes "
                                                         "planned different folders",
                                                         out_.str(), lines.size(), files_.size()));
  }
  for (size_t f = 0; f < files_.size(); ++f) {
    uploads_.push_back(store_->join_upload(out_.child(files_[f].first), layouts_[f], lines[f]));
    pending_.push_back(storage::remember_pending_upload(store_, *uploads_.back()));
  }
}

void ExportObjects::own(const std::vector<std::vector<uint32_t>>& owned_by_file) {
  for (size_t f = 0; f < files_.size(); ++f) {
    writers_.push_back(std::make_unique<storage::PartWriter>(*uploads_[f], owned_by_file[f], parts_in_flight_));
    const std::string& header = files_[f].second.header_bytes();
    writers_.back()->write_at(0, std::as_bytes(std::span(header.data(), header.size())));
  }
}

void ExportObjects::write_at(size_t file, uint64_t offset, std::span<const std::byte> bytes) {
  writers_.at(file)->write_at(offset, bytes);
}

std::string ExportObjects::finish() {
  std::string text;
  for (size_t f = 0; f < writers_.size(); ++f) {
    for (const storage::PartReceipt& receipt : writers_[f]->finish()) {
      text += fmt::format("{} {}\n", f, receipt.serialize());
    }
  }
  return text;
}

void ExportObjects::complete(std::span<const std::string> receipts_by_process) {
  std::vector<std::vector<storage::PartReceipt>> receipts(files_.size());
  for (const std::string& text : receipts_by_process) {
    for (const std::string& line : lines_of(text)) {
      const size_t space = line.find(' ');
      const size_t file = std::stoul(line.substr(0, space));
      if (space == std::string::npos || file >= files_.size()) {
        throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: a malformed receipt {:?}", out_.str(), line));
      }
      receipts[file].push_back(storage::PartReceipt::parse(line.substr(space + 1)));
    }
  }
  size_t completed = 0;
  try {
    for (; completed < files_.size(); ++completed) uploads_[completed]->complete(std::move(receipts[completed]));
  } catch (...) {
    // Into an empty folder: take back the files that did appear, so that the
    // failed export leaves nothing (a replaced folder's files cannot be restored).
    if (!replace_) {
      for (size_t f = 0; f < completed; ++f) store_->remove(out_.child(files_[f].first));
    }
    throw;
  }
}

void ExportObjects::write_small(std::string_view name, std::string_view text) {
  store_->write_all(out_.child(name), text, storage::IfExists::kReplace);
}

void ExportObjects::remove_stale(std::span<const std::string> names) {
  for (const std::string& name : names) {
    const bool kept = std::any_of(files_.begin(), files_.end(), [&](const auto& file) { return file.first == name; });
    if (!kept) store_->remove(out_.child(name));
  }
}

uint64_t ExportObjects::uploaded_bytes() const {
  uint64_t bytes = 0;
  for (const auto& writer : writers_) bytes += writer->uploaded_bytes();
  return bytes;
}

}  // namespace reshard::pipelines_detail
