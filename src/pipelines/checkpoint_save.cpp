#include "reshard/pipelines/checkpoint_save.h"

#include <cstring>
#include <functional>
#include <future>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "agreement.h"
#include "folder_commit.h"
#include "reshard/formats/checksum.h"
#include "reshard/formats/atomic_file.h"
#include "reshard/formats/safetensors_layout.h"
#include "reshard/layout/error.h"
#include "reshard/pipelines/save_plan.h"

namespace reshard {
namespace {

namespace fs = std::filesystem;
namespace detail = pipelines_detail;

constexpr size_t kHashAsideBytes = size_t{4} << 20;

// A data file written front to back: the header, then each chunk in file
// order (as SavePlan orders them), with plain sequential writes.
class DataFileWriter {
 public:
  DataFileWriter(const fs::path& path, const safetensors::FileLayout& layout)
      : layout_(layout), file_(AtomicFile::create(path)) {
    file_.write(std::as_bytes(std::span(layout_.header_bytes())));
    position_ = layout_.header_bytes().size();
  }

  void write(const std::string& key, std::span<const std::byte> bytes) {
    const safetensors::TensorInfo& info = layout_.header().at(key);
    if (layout_.header().file_offset(info) != position_ || info.byte_size() != bytes.size()) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: chunk {} written out of order",
                                                           file_.final_path().string(), key));
    }
    file_.write(bytes);
    position_ += bytes.size();
  }

  // Checks every byte is there, then fsyncs and renames into place.
  void commit() {
    if (position_ != layout_.file_size()) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: {} of {} bytes written", file_.final_path().string(),
                                                           position_, layout_.file_size()));
    }
    file_.commit();
  }

 private:
  const safetensors::FileLayout& layout_;
  AtomicFile file_;
  uint64_t position_ = 0;
};

// One process's part of one save, from planning to the agreed commit.
class SaveJob {
 public:
  SaveJob(fs::path path, std::span<const NamedArray> arrays, Transport& transport, SaveOptions options)
      : path_(detail::normalized_folder(path)),
        arrays_(arrays.begin(), arrays.end()),
        transport_(transport),
        options_(std::move(options)),
        what_(fmt::format("saving checkpoint {}", path_.string())) {}

  // Collective: plans, has process 0 prepare the staging folder, and agrees
  // that every process can go on. Throws the same failure everywhere.
  void prepare() {
    const int rank = transport_.rank();
    detail::Failure failure;
    detail::run_step(failure, [&] {
      plan_ = SavePlan::make(arrays_, transport_.size());
      for (const NamedArray& named : arrays_) {
        if (named.array.process() != rank) {
          throw Error(ErrorCode::kInvalidArgument, fmt::format("array '{}' is process {}'s part, this is process {}",
                                                               named.name, named.array.process(), rank));
        }
      }
      if (rank == 0) detail::prepare_staging(path_, options_.replace);
    });
    const auto reports = detail::exchange_reports(transport_, {failure.message, {}});
    if (rank == 0 && failure.error == nullptr) {
      for (const auto& report : reports) {
        if (!report.error.empty()) detail::abandon_staging(path_);
      }
    }
    detail::require_all_succeeded(reports, rank, what_, failure.error);
    checksums_.assign(my_chunks().size(), 0);
    detail::run_step(failure_, [&] {
      if (const auto& layout = plan_->file_of(rank)) {
        writer_.emplace(detail::staging_folder_for(path_) / data_file_name(rank), *layout);
      }
    });
  }

  const std::vector<size_t>& my_chunks() const { return plan_->chunks_of(transport_.rank()); }

  // The bytes of this process's `i`-th chunk in its arrays (the shard is the chunk).
  std::span<const std::byte> source_bytes(size_t i) const {
    const PlannedChunk& chunk = plan_->chunks()[my_chunks()[i]];
    return arrays_[chunk.array].array.shard(chunk.device).buffer.bytes();
  }

  // Writes this process's `i`-th chunk; a failure is kept for finish().
  void write(size_t i, std::span<const std::byte> bytes) {
    detail::run_step(failure_, [&] {
      const PlannedChunk& chunk = plan_->chunks()[my_chunks()[i]];
      // A large chunk is hashed on another thread while it is written.
      if (bytes.size() >= kHashAsideBytes) {
        std::future<uint64_t> hash = std::async(std::launch::async, [bytes] { return xxh64(bytes); });
        writer_->write(chunk.key, bytes);
        checksums_[i] = hash.get();
      } else {
        writer_->write(chunk.key, bytes);
        checksums_[i] = xxh64(bytes);
      }
      stats_.chunks_written += 1;
      stats_.bytes_written += bytes.size();
    });
  }

  void count_wave() { stats_.waves += 1; }

  // Runs a step of this process's part (staging, say); a failure is kept
  // for finish(), which every process still reaches.
  void guard(const std::function<void()>& step) { detail::run_step(failure_, step); }

  // Collective: fsyncs this process's file, agrees with the others, and has
  // process 0 write the manifest and rename the folder into place.
  SaveStats finish() {
    const int rank = transport_.rank();
    detail::run_step(failure_, [&] {
      if (writer_) writer_->commit();
    });
    // A failed writer removes its temporary now, before process 0 may remove the folder.
    if (failure_) writer_.reset();
    const auto reports = detail::exchange_reports(transport_, {failure_.message, checksums_});
    bool all_wrote = true;
    for (const auto& report : reports) all_wrote = all_wrote && report.error.empty();
    if (!all_wrote) {
      writer_.reset();
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
  void commit_manifest(const std::vector<detail::Report>& reports) {
    std::vector<uint64_t> checksums(plan_->chunks().size(), 0);
    for (size_t p = 0; p < reports.size(); ++p) {
      const std::vector<size_t>& theirs = plan_->chunks_of(static_cast<int>(p));
      if (reports[p].values.size() != theirs.size()) {
        throw Error(ErrorCode::kTransport, fmt::format("process {} reported {} checksums for {} chunks", p,
                                                       reports[p].values.size(), theirs.size()));
      }
      for (size_t i = 0; i < theirs.size(); ++i) checksums[theirs[i]] = reports[p].values[i];
    }
    const checkpoint::Manifest manifest = plan_->manifest(arrays_, checksums, options_.metadata);
    checkpoint::validate_manifest(manifest, what_);
    detail::commit_staging(path_, checkpoint::serialize_manifest(manifest));
  }

  fs::path path_;
  std::vector<NamedArray> arrays_;
  Transport& transport_;
  SaveOptions options_;
  std::string what_;
  std::optional<SavePlan> plan_;
  std::optional<DataFileWriter> writer_;
  std::vector<uint64_t> checksums_;
  detail::Failure failure_;
  SaveStats stats_;
};

// This process's chunks cut into waves of at most `budget` staged bytes.
std::vector<std::vector<size_t>> waves_of(const SaveJob& job, uint64_t budget) {
  std::vector<std::vector<size_t>> waves(1);
  uint64_t staged = 0;
  for (size_t i = 0; i < job.my_chunks().size(); ++i) {
    const uint64_t bytes = job.source_bytes(i).size();
    if (!waves.back().empty() && staged + bytes > budget) {
      waves.emplace_back();
      staged = 0;
    }
    waves.back().push_back(i);
    staged += bytes;
  }
  return waves;
}

std::vector<Buffer> stage(const SaveJob& job, const std::vector<size_t>& wave) {
  std::vector<Buffer> staged;
  staged.reserve(wave.size());
  for (size_t i : wave) {
    const std::span<const std::byte> bytes = job.source_bytes(i);
    Buffer copy = Buffer::allocate(bytes.size());
    if (!bytes.empty()) std::memcpy(copy.data(), bytes.data(), bytes.size());
    staged.push_back(std::move(copy));
  }
  return staged;
}

}  // namespace

struct SaveHandle::State {
  std::future<SaveStats> result;
};

SaveHandle::SaveHandle() = default;
SaveHandle::SaveHandle(std::shared_ptr<State> state) : state_(std::move(state)) {}
SaveHandle::SaveHandle(SaveHandle&&) noexcept = default;
SaveHandle& SaveHandle::operator=(SaveHandle&&) noexcept = default;

SaveHandle::~SaveHandle() {
  if (state_ && state_->result.valid()) state_->result.wait();
}

SaveStats SaveHandle::wait() {
  if (!state_ || !state_->result.valid()) throw Error(ErrorCode::kInvalidArgument, "SaveHandle: nothing to wait for");
  return state_->result.get();
}

bool SaveHandle::ready() const {
  return state_ && state_->result.valid() &&
         state_->result.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

SaveStats save_checkpoint(const fs::path& path, std::span<const NamedArray> arrays, Transport& transport,
                          const SaveOptions& options) {
  SaveJob job(path, arrays, transport, options);
  job.prepare();
  for (size_t i = 0; i < job.my_chunks().size(); ++i) job.write(i, job.source_bytes(i));
  return job.finish();
}

SaveHandle save_checkpoint_async(const fs::path& path, std::span<const NamedArray> arrays, Transport& transport,
                                 const SaveOptions& options) {
  auto state = std::make_shared<SaveHandle::State>();
  auto job = std::make_shared<SaveJob>(path, arrays, transport, options);
  try {
    job->prepare();
  } catch (...) {
    std::promise<SaveStats> failed;
    failed.set_exception(std::current_exception());
    state->result = failed.get_future();
    return SaveHandle(std::move(state));
  }
  const std::vector<std::vector<size_t>> waves = waves_of(*job, options.staging_bytes);
  std::vector<Buffer> last;
  job->guard([&] {
    for (size_t w = 0; w + 1 < waves.size(); ++w) {
      const std::vector<Buffer> staged = stage(*job, waves[w]);
      for (size_t k = 0; k < staged.size(); ++k) job->write(waves[w][k], staged[k].bytes());
      job->count_wave();
    }
    last = stage(*job, waves.back());
    job->count_wave();
  });
  state->result = std::async(std::launch::async, [job, wave = waves.back(), last = std::move(last)]() {
    for (size_t k = 0; k < last.size(); ++k) job->write(wave[k], last[k].bytes());  // none if staging failed
    return job->finish();
  });
  return SaveHandle(std::move(state));
}

}  // namespace reshard
