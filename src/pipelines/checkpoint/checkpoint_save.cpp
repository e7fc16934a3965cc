#include "reshard/pipelines/checkpoint_save.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "formats/checksum.h"
#include "pipelines/checkpoint/checkpoint_objects.h"
#include "pipelines/checkpoint/checkpoint_stream.h"
#include "pipelines/checkpoint/data_file_writer.h"
#include "pipelines/checkpoint/folder_commit.h"
#include "pipelines/checkpoint/save_plan.h"
#include "pipelines/checkpoint/staging_budget.h"
#include "pipelines/common/agreement.h"
#include "reshard/formats/safetensors_layout.h"
#include "reshard/layout/error.h"

namespace reshard {

using formats_detail::BlockChecksums;
using formats_detail::BlockHasher;
using pipelines_detail::data_file_name;
using pipelines_detail::PlannedChunk;
using pipelines_detail::SavePlan;
using pipelines_detail::SaveTensor;

namespace {

namespace fs = std::filesystem;
namespace detail = pipelines_detail;

constexpr size_t kHashAsideBytes = size_t{4} << 20;

// "out/" and "out" name the same local folder; a Location already says one object folder one way.
storage::Location normalized(const storage::Location& where) {
  return where.is_local() ? storage::Location(detail::normalized_folder(where.local_path())) : where;
}

// One process's part of one save, from planning to the agreed commit: into a
// local staging folder renamed into place (folder_commit.h), or into objects
// that appear when the manifest does (checkpoint_objects.h).
class SaveJob {
 public:
  SaveJob(const storage::Location& where, std::span<const NamedArray> arrays, Transport& transport,
          SaveOptions options)
      : SaveJob(where, tensors_of(arrays), transport, std::move(options)) {
    arrays_.assign(arrays.begin(), arrays.end());
  }

  SaveJob(const storage::Location& where, std::vector<SaveTensor> tensors, Transport& transport, SaveOptions options)
      : where_(normalized(where)),
        tensors_(std::move(tensors)),
        transport_(transport),
        options_(std::move(options)),
        what_(fmt::format("saving checkpoint {}", where_.str())) {
    if (where_.is_local()) path_ = where_.local_path();
  }

  // Collective: plans, has process 0 prepare the staging folder, and agrees
  // that every process can go on. Throws the same failure everywhere.
  void prepare() {
    const int rank = transport_.rank();
    detail::Failure failure;
    detail::run_step(failure, [&] {
      plan_ = SavePlan::make(tensors_, transport_.size());
      for (const NamedArray& named : arrays_) {  // none when the bytes come from elsewhere
        if (named.array.process() != rank) {
          throw Error(ErrorCode::kInvalidArgument, fmt::format("array '{}' is process {}'s part, this is process {}",
                                                               named.name, named.array.process(), rank));
        }
      }
      if (rank == 0 && local()) detail::prepare_staging(path_, options_.replace);
      if (rank == 0 && !local()) replacing_ = detail::check_object_destination(where_, options_.replace);
    });
    const auto reports = detail::exchange_reports(transport_, {failure.message, {}});
    if (rank == 0 && failure.error == nullptr && local()) {
      for (const auto& report : reports) {
        if (!report.error.empty()) detail::abandon_staging(path_);
      }
    }
    detail::require_all_succeeded(reports, rank, what_, failure.error);
    // Processes that were given different arrays, dtypes or layouts (a flag
    // that differs on one host) would write files that do not match the
    // manifest process 0 writes: refused on every process, before any data.
    if (!transport_.all_equal(plan_->fingerprint())) {
      if (rank == 0 && local()) detail::abandon_staging(path_);
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: the processes do not save the same tensors (names, dtypes, shapes and layouts "
                              "differ between them): every process must be given the same",
                              what_));
    }
    checksums_.assign(my_chunks().size(), {});
    detail::run_step(failure_, [&] {
      if (const auto& layout = plan_->file_of(rank)) open_data_file(*layout);
    });
  }

  const std::vector<size_t>& my_chunks() const { return plan_->chunks_of(transport_.rank()); }
  const PlannedChunk& my_chunk(size_t i) const { return plan_->chunks()[my_chunks()[i]]; }
  const SaveOptions& options() const { return options_; }

  // The bytes of one of this process's chunks in its arrays (the shard is the chunk).
  std::span<const std::byte> source_bytes_of(const PlannedChunk& chunk) const {
    return arrays_.at(chunk.array).array.shard(chunk.device).buffer.bytes();
  }
  std::span<const std::byte> source_bytes(size_t i) const { return source_bytes_of(my_chunk(i)); }

  // Writes the next bytes of this process's `i`-th chunk (its chunks in
  // order, each in order); `last` ends the chunk. A failure is kept for finish().
  void write(size_t i, std::span<const std::byte> bytes, bool last = true) {
    detail::run_step(failure_, [&] {
      const PlannedChunk& chunk = my_chunk(i);
      if (!hasher_) hasher_.emplace(options_.checksum_block_bytes);
      // A large piece is hashed on another thread while it is written.
      if (bytes.size() >= kHashAsideBytes) {
        std::future<void> hash = std::async(std::launch::async, [this, bytes] { hasher_->update(bytes); });
        writer_->write_part(chunk.key, bytes, last);
        hash.get();
      } else {
        writer_->write_part(chunk.key, bytes, last);
        hasher_->update(bytes);
      }
      stats_.bytes_written += bytes.size();
      if (last) {
        checksums_[i] = hasher_->finish();
        hasher_.reset();
        stats_.chunks_written += 1;
      }
    });
  }

  // Takes a failure another thread had (staging, say) as this process's own,
  // unless it already has one; finish() reports it.
  void adopt(const detail::Failure& failure) {
    if (failure && !failure_) failure_ = failure;
  }

  // Figures the stager kept, added before finish().
  void add_staging_stats(uint64_t waves, uint64_t peak) {
    stats_.waves = waves;
    stats_.peak_staged_bytes = peak;
  }

  // Collective: fsyncs this process's file, agrees with the others, and has
  // process 0 write the manifest and rename the folder into place.
  SaveResult finish() {
    if (!local()) return finish_objects();
    const int rank = transport_.rank();
    detail::run_step(failure_, [&] {
      if (writer_) writer_->commit();
    });
    // A failed writer removes its temporary now, before process 0 may remove the folder.
    if (failure_) drop_data_file();
    const auto reports = detail::exchange_reports(transport_, {failure_.message, flat_checksums()});
    bool all_wrote = true;
    for (const auto& report : reports) all_wrote = all_wrote && report.error.empty();
    if (!all_wrote) {
      drop_data_file();
      if (rank == 0) detail::abandon_staging(path_);
      detail::require_all_succeeded(reports, rank, what_, failure_.error);
    }
    detail::Failure commit;
    if (rank == 0) {
      detail::run_step(commit, [&] { commit_manifest(reports); });
      if (commit) detail::abandon_staging(path_);
    }
    const auto verdicts = detail::exchange_reports(transport_, {commit.message, {}});
    detail::require_all_succeeded(verdicts, rank, what_, commit.error);
    return stats_;
  }

 private:
  bool local() const { return where_.is_local(); }

  // This process's data file: a temporary in the staging folder, or an upload.
  void open_data_file(const safetensors::FileLayout& layout) {
    const std::string name = data_file_name(transport_.rank());
    if (local()) {
      file_ = std::make_unique<detail::LocalDataFile>(detail::staging_folder_for(path_) / name);
    } else {
      object_ = std::make_unique<detail::DataObject>(where_.child(name), layout.file_size(), options_.part_bytes,
                                                     options_.parts_in_flight);
    }
    writer_.emplace(local() ? static_cast<detail::DataFileSink&>(*file_) : *object_, layout);
  }

  // After a failure: the temporary file removed, the upload aborted or the
  // completed object removed.
  void drop_data_file() {
    writer_.reset();
    file_.reset();
    if (object_) object_->discard();
    object_.reset();
  }

  // Throws, everywhere, unless every process succeeded, after this one dropped its data file.
  void agree_or_drop(const std::vector<detail::Report>& reports, std::exception_ptr own) {
    const bool all = std::all_of(reports.begin(), reports.end(), [](const auto& report) { return report.error.empty(); });
    if (all) return;
    drop_data_file();
    detail::require_all_succeeded(reports, transport_.rank(), what_, std::move(own));
  }
  void agree_or_drop(const detail::Failure& step) {
    agree_or_drop(detail::exchange_reports(transport_, {step.message, {}}), step.error);
  }

  // The objects' commit (checkpoint_objects.h): every upload in, then the old
  // manifest gone, then every data file completed, then the new manifest;
  // each step agreed before the next, and a failure undoes what appeared.
  SaveResult finish_objects() {
    const int rank = transport_.rank();
    detail::Failure step;
    try {
      detail::run_step(failure_, [&] {
        if (writer_) writer_->commit();
      });
      const auto reports = detail::exchange_reports(transport_, {failure_.message, flat_checksums()});
      agree_or_drop(reports, failure_.error);
      if (rank == 0 && replacing_) detail::run_step(step, [&] { detail::retire_object_manifest(where_); });
      agree_or_drop(step);
      detail::run_step(step, [&] {
        if (object_) object_->complete();
      });
      agree_or_drop(step);
      if (rank == 0) detail::run_step(step, [&] { commit_manifest(reports); });
    } catch (...) {
      // A peer lost in an exchange: no later step happens, so nothing may stay.
      drop_data_file();
      throw;
    }
    // Process 0 removed the manifest again if writing it failed; a peer lost
    // in this last exchange leaves the outcome unknown (the manifest may be
    // there), so the data files then stay.
    agree_or_drop(step);
    return stats_;
  }

  // Each chunk's whole checksum, then its block checksums, in chunk order.
  std::vector<uint64_t> flat_checksums() const {
    std::vector<uint64_t> flat;
    for (const BlockChecksums& chunk : checksums_) {
      flat.push_back(chunk.whole);
      flat.insert(flat.end(), chunk.blocks.begin(), chunk.blocks.end());
    }
    return flat;
  }

  void commit_manifest(const std::vector<detail::Report>& reports) {
    const uint64_t block_bytes = options_.checksum_block_bytes;
    std::vector<BlockChecksums> checksums(plan_->chunks().size());
    for (size_t p = 0; p < reports.size(); ++p) {
      const std::vector<size_t>& theirs = plan_->chunks_of(static_cast<int>(p));
      const std::vector<uint64_t>& values = reports[p].values;
      size_t at = 0;
      for (size_t c : theirs) {
        const PlannedChunk& chunk = plan_->chunks()[c];
        const uint64_t length = checkpoint::dense_bytes(chunk.dtype, chunk.box.shape());
        const size_t blocks = block_bytes == 0 ? 0 : static_cast<size_t>(checkpoint::block_count(length, block_bytes));
        if (values.size() - at < 1 + blocks) {
          throw Error(ErrorCode::kTransport, fmt::format("process {} reported {} checksums, too few for its {} chunks",
                                                         p, values.size(), theirs.size()));
        }
        checksums[c].whole = values[at];
        checksums[c].blocks.assign(values.begin() + static_cast<std::ptrdiff_t>(at + 1),
                                   values.begin() + static_cast<std::ptrdiff_t>(at + 1 + blocks));
        at += 1 + blocks;
      }
      if (at != values.size()) {
        throw Error(ErrorCode::kTransport, fmt::format("process {} reported {} checksums, {} expected", p,
                                                       values.size(), at));
      }
    }
    const checkpoint::Manifest manifest = plan_->manifest(tensors_, checksums, block_bytes, options_.metadata);
    checkpoint::validate_manifest(manifest, what_);
    if (local()) {
      detail::commit_staging(path_, checkpoint::serialize_manifest(manifest));
    } else {
      detail::write_object_manifest(where_, checkpoint::serialize_manifest(manifest), manifest.files);
    }
  }

  static std::vector<SaveTensor> tensors_of(std::span<const NamedArray> arrays) {
    std::vector<SaveTensor> tensors;
    for (const NamedArray& named : arrays) tensors.push_back(SaveTensor::of(named));
    return tensors;
  }

  storage::Location where_;
  fs::path path_;  // where_, when local
  bool replacing_ = false;  // process 0, objects: a checkpoint is there to replace
  std::vector<SaveTensor> tensors_;
  std::vector<NamedArray> arrays_;  // empty when the bytes come from elsewhere
  Transport& transport_;
  SaveOptions options_;
  std::string what_;
  std::optional<SavePlan> plan_;
  std::unique_ptr<detail::LocalDataFile> file_;  // local: this process's data file, if it writes one
  std::unique_ptr<detail::DataObject> object_;   // objects: the same
  std::optional<detail::DataFileWriter> writer_;  // into one of them: after them, destroyed first
  std::vector<BlockChecksums> checksums_;
  std::optional<BlockHasher> hasher_;  // of the chunk being written
  detail::Failure failure_;
  SaveResult stats_;
};

// Staged pieces on their way from the stager to the writer thread.
class PieceQueue {
 public:
  struct Piece {
    size_t chunk = 0;  // index into the job's my_chunks()
    bool last = false;  // ends its chunk
    Buffer bytes;
  };

  void push(Piece piece) {
    {
      std::lock_guard lock(mutex_);
      pieces_.push_back(std::move(piece));
    }
    ready_.notify_one();
  }

  // Lets pop() hand out pieces before the queue is closed.
  void open() {
    {
      std::lock_guard lock(mutex_);
      open_ = true;
    }
    ready_.notify_one();
  }

  // Ends the queue; `failure` (of staging) goes to the writer.
  void close(detail::Failure failure) {
    {
      std::lock_guard lock(mutex_);
      closed_ = true;
      failure_ = std::move(failure);
    }
    ready_.notify_one();
  }

  // The next piece once the queue is open, or nullopt once it is closed and empty.
  std::optional<Piece> pop() {
    std::unique_lock lock(mutex_);
    ready_.wait(lock, [&] { return closed_ || (open_ && !pieces_.empty()); });
    if (pieces_.empty()) return std::nullopt;
    Piece piece = std::move(pieces_.front());
    pieces_.pop_front();
    return piece;
  }

  // Staging's failure, once pop() has returned nullopt.
  const detail::Failure& failure() const { return failure_; }

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Piece> pieces_;
  bool open_ = false;
  bool closed_ = false;
  detail::Failure failure_;
};

// Memory for a staged piece: plain pages, not Buffer::allocate's huge pages,
// whose first touch can stall on compaction (the copy is made once and
// freed once written; huge pages would not pay for themselves).
Buffer staging_buffer(size_t size) {
  std::shared_ptr<std::byte[]> owner(new std::byte[size == 0 ? 1 : size]);
  const std::span<std::byte> bytes(owner.get(), size);
  return Buffer::adopt(bytes, std::move(owner));
}

// A save whose bytes are staged by the calling thread while a background
// thread writes them: the pipeline of a save_checkpoint_async or of a
// streamed save.
class StagedSave {
 public:
  explicit StagedSave(std::shared_ptr<SaveJob> job) : job_(std::move(job)), budget_(job_->options().staging_bytes) {}

  // Starts the writer thread: it writes pieces as they come, then commits.
  std::future<SaveResult> start_writer() {
    return std::async(std::launch::async, [job = job_, self = this] { return self->write_all(*job); });
  }

  // Stages every piece of this process's chunks with `fill` (in the calling
  // thread), each once its bytes fit in the budget; returns when all are
  // staged or staging failed. The writer starts once staging is done or the
  // budget is full, whichever comes first: while the save fits in the budget
  // it does not compete with the caller's copies (the caller's time is the
  // one that counts), beyond it the two overlap.
  void stage_all(const detail::ChunkFill& fill) {
    detail::Failure failure;
    detail::run_step(failure, [&] {
      const uint64_t piece_bytes = detail::piece_bytes_for(job_->options().staging_bytes);
      for (size_t i = 0; i < job_->my_chunks().size(); ++i) {
        const PlannedChunk& chunk = job_->my_chunk(i);
        const auto element_bytes = static_cast<uint64_t>(reshard::element_bytes(chunk.dtype));
        const std::vector<Box> pieces = detail::contiguous_pieces(chunk.box, element_bytes, piece_bytes);
        for (size_t k = 0; k < pieces.size(); ++k) {
          const uint64_t bytes = checkpoint::dense_bytes(chunk.dtype, pieces[k].shape());
          if (!budget_.fits(bytes)) queue_.open();
          budget_.take(bytes);
          Buffer staged;
          try {
            staged = staging_buffer(static_cast<size_t>(bytes));
            fill(chunk, pieces[k], staged.bytes());
          } catch (...) {
            budget_.give(bytes);
            throw;
          }
          queue_.push({i, k + 1 == pieces.size(), std::move(staged)});
        }
      }
    });
    queue_.close(std::move(failure));
  }

 private:
  SaveResult write_all(SaveJob& job) {
    while (std::optional<PieceQueue::Piece> piece = queue_.pop()) {
      job.write(piece->chunk, piece->bytes.bytes(), piece->last);
      const uint64_t bytes = piece->bytes.size();
      piece.reset();  // frees the staged copy before its bytes go back to the budget
      budget_.give(bytes);
    }
    job.adopt(queue_.failure());
    job.add_staging_stats(1 + budget_.waits(), budget_.peak());
    return job.finish();
  }

  std::shared_ptr<SaveJob> job_;
  detail::StagingBudget budget_;
  PieceQueue queue_;
};

// Copies a piece of a chunk out of this process's arrays (the chunk is a
// shard, dense, so a piece is a run of its bytes).
detail::ChunkFill fill_from_arrays(const SaveJob& job) {
  return [&job](const PlannedChunk& chunk, const Box& piece, std::span<std::byte> out) {
    const std::span<const std::byte> shard = job.source_bytes_of(chunk);
    // The piece's first element, row-major in the chunk.
    uint64_t first = 0;
    for (size_t d = 0; d < chunk.box.rank(); ++d) {
      first = first * static_cast<uint64_t>(chunk.box.shape()[d]) +
              static_cast<uint64_t>(piece.origin()[d] - chunk.box.origin()[d]);
    }
    const auto offset = static_cast<size_t>(first * static_cast<uint64_t>(element_bytes(chunk.dtype)));
    if (offset + out.size() > shard.size()) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("chunk {}: piece {} passes the end of its shard", chunk.key,
                                                           piece.to_string()));
    }
    if (!out.empty()) std::memcpy(out.data(), shard.data() + offset, out.size());
  };
}

}  // namespace

struct SaveHandle::State {
  std::shared_ptr<StagedSave> pipeline;  // outlives its writer thread
  std::future<SaveResult> result;
};

SaveHandle::SaveHandle() = default;
SaveHandle::SaveHandle(std::shared_ptr<State> state) : state_(std::move(state)) {}
SaveHandle::SaveHandle(SaveHandle&&) noexcept = default;
SaveHandle& SaveHandle::operator=(SaveHandle&&) noexcept = default;

SaveHandle::~SaveHandle() {
  if (state_ && state_->result.valid()) state_->result.wait();
}

SaveResult SaveHandle::wait() {
  if (!state_ || !state_->result.valid()) throw Error(ErrorCode::kInvalidArgument, "SaveHandle: nothing to wait for");
  return state_->result.get();
}

bool SaveHandle::ready() const {
  return state_ && state_->result.valid() &&
         state_->result.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

SaveResult save_checkpoint(std::span<const NamedArray> arrays, const storage::Location& path, Transport& transport,
                          const SaveOptions& options) {
  SaveJob job(path, arrays, transport, options);
  job.prepare();
  for (size_t i = 0; i < job.my_chunks().size(); ++i) job.write(i, job.source_bytes(i));
  return job.finish();
}

SaveHandle save_checkpoint_async(std::span<const NamedArray> arrays, const storage::Location& path,
                                 Transport& transport, const SaveOptions& options) {
  auto state = std::make_shared<SaveHandle::State>();
  auto job = std::make_shared<SaveJob>(path, arrays, transport, options);
  try {
    job->prepare();
  } catch (...) {
    std::promise<SaveResult> failed;
    failed.set_exception(std::current_exception());
    state->result = failed.get_future();
    return SaveHandle(std::move(state));
  }
  state->pipeline = std::make_shared<StagedSave>(job);
  state->result = state->pipeline->start_writer();
  state->pipeline->stage_all(fill_from_arrays(*job));
  return SaveHandle(std::move(state));
}

namespace pipelines_detail {

SaveResult save_checkpoint_streamed(const storage::Location& path, std::span<const SaveTensor> tensors,
                                   Transport& transport, const SaveOptions& options, const ChunkFill& fill) {
  auto job = std::make_shared<SaveJob>(path, std::vector<SaveTensor>(tensors.begin(), tensors.end()), transport, options);
  job->prepare();
  StagedSave pipeline(job);
  std::future<SaveResult> result = pipeline.start_writer();
  pipeline.stage_all(fill);
  return result.get();
}

}  // namespace pipelines_detail

}  // namespace reshard
