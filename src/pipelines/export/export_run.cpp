#include "pipelines/export/export_run.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <optional>

#include <fmt/format.h>

#include "pipelines/common/agreement.h"
#include "pipelines/export/export_output.h"
#include "pipelines/export/export_produce.h"
#include "pipelines/export/export_slices.h"
#include "pipelines/export/export_write_queue.h"
#include "reshard/execute/executor.h"
#include "reshard/execute/transport_calls.h"
#include "reshard/layout/error.h"

namespace reshard::pipelines_detail {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// The input, with the time spent reading it counted: summed over the
// producer's copy threads, which may read several boxes at once.
class TimedInput final : public ExportInput {
 public:
  explicit TimedInput(const ExportInput& input) : input_(input) {}
  const std::vector<safetensors::TensorSpec>& specs() const override { return input_.specs(); }
  bool readable_by(int process, size_t source, const Box& box) const override {
    return input_.readable_by(process, source, box);
  }
  void read(size_t source, const Box& box, std::span<std::byte> out) const override {
    const auto start = Clock::now();
    input_.read(source, box, out);
    seconds_.fetch_add(since(start), std::memory_order_relaxed);
  }
  double seconds() const { return seconds_.load(std::memory_order_relaxed); }

 private:
  const ExportInput& input_;
  mutable std::atomic<double> seconds_ = 0;
};

// One process's side of the export.
class ExportRun {
 public:
  ExportRun(const ExportPlan& plan, const std::vector<ExportBlock>& blocks, const ExportInput& input,
            const storage::Location& out, const ExportOptions& options, Transport& transport)
      : plan_(plan), blocks_(blocks), input_(input),
        producer_(plan, input_, ExecuteOptions{}.copy_threads(processes_on_this_host(transport))),
        options_(options), transport_(transport),
        output_(out, plan, options.max_shard_size, options.replace, options.part_bytes, options.parts_in_flight),
        rank_(transport.rank()), root_(options.gather_to.value_or(0)),
        gather_(options.gather_to.has_value() && output_.objects() == nullptr),
        objects_(output_.objects() != nullptr), what_(fmt::format("exporting to {}", out.str())) {}

  ExportResult run(const ExportSteps& steps) {
    const auto start = Clock::now();
    open_files();
    if (gather_ || objects_) tags_ = transport_.begin_operation();
    if (!gather_ && !objects_) start_queue();
    size_t next = 0;
    for (size_t t = 0; t < plan_.tensors.size(); ++t) {
      if (steps.before) steps.before(t);
      for (; next < blocks_.size() && blocks_[next].tensor == t; ++next) {
        if (objects_) {
          object_block(next);
        } else {
          gather_ ? gather_block(next) : queue_own_block(next);
        }
      }
      if (steps.after) steps.after(t);
    }
    if (objects_) return finish_objects(start);
    if (queue_) {
      run_step(failure_, [&] { queue_->finish(); });
      times_.write = queue_->write_seconds();
      queue_.reset();
    }
    auto phase = Clock::now();
    if (writes_here()) run_step(failure_, [&] { output_.sync(); });
    times_.sync = since(phase);
    phase = Clock::now();
    agree();
    if (rank_ == root_) run_step(failure_, [&] { output_.commit(); });
    agree();
    times_.commit = since(phase);
    times_.read = input_.seconds();
    times_.total = since(start);
    return result();
  }

 private:
  bool writes_here() const { return !gather_ || rank_ == root_; }

  ExportResult result() const {
    return {plan_.tensors.size(), plan_.merged, output_.files(), plan_.total_bytes(), written_, times_,
            plan_.hf_config.has_value()};
  }

  // An object store: every process uploads the parts it owns; the root
  // completes the uploads from everyone's receipts and writes the rest.
  ExportResult finish_objects(Clock::time_point start) {
    auto phase = Clock::now();
    std::string receipts;
    run_step(failure_, [&] { receipts = output_.objects()->finish(); });
    times_.sync = since(phase);
    phase = Clock::now();
    agree();
    const auto all = transport_.all_gather(std::as_bytes(std::span(receipts)));
    if (rank_ == root_) {
      for (const auto& bytes : all) output_.receipts.emplace_back(reinterpret_cast<const char*>(bytes.data()), bytes.size());
      run_step(failure_, [&] { output_.commit(); });
    }
    agree();
    output_.objects()->committed();
    times_.commit = since(phase);
    times_.read = input_.seconds();
    times_.total = since(start);
    return result();
  }

  // Block `index` for an object store: its producer writes the slices of the
  // parts it owns and sends each other slice to its part's owner (a status
  // word, then the bytes), in block order on every process, as gather_block does.
  void object_block(size_t index) {
    const ExportBlock& block = blocks_[index];
    const bool produced_here = block.process == rank_;
    if (produced_here) run_step(failure_, [&] { produce(block); });
    Tag tag = tags_ + 2 * first_moved_[index];
    for (const BlockSlice& slice : parts_->slices[index]) {
      const auto length = static_cast<size_t>(slice.length);
      if (slice.owner == block.process) {
        if (produced_here && !failure_) {
          run_step(failure_, [&] { write_slice(slice, std::span(buffer_).subspan(slice.block_offset, length)); });
        }
        continue;
      }
      if (produced_here) {
        const uint64_t status = failure_ ? 1 : 0;
        transport_.send(slice.owner, tag, std::as_bytes(std::span(&status, 1)));
        if (status == 0) transport_.send(slice.owner, tag + 1, std::span(buffer_).subspan(slice.block_offset, length));
      } else if (slice.owner == rank_) {
        uint64_t status = 0;
        transport_.recv(block.process, tag, std::as_writable_bytes(std::span(&status, 1)));
        if (status == 0) {
          slice_buffer_.resize(length);
          transport_.recv(block.process, tag + 1, slice_buffer_);
          run_step(failure_, [&] { write_slice(slice, slice_buffer_); });
        }
      }
      tag += 2;
    }
  }

  void write_slice(const BlockSlice& slice, std::span<const std::byte> bytes) {
    const auto start = Clock::now();
    output_.objects()->write_at(slice.file, slice.offset, bytes);
    written_ += bytes.size();
    times_.write += since(start);
  }

  void agree() {
    const auto reports = exchange_reports(transport_, {failure_.message, {}});
    require_all_succeeded(reports, rank_, what_, failure_.error);
  }

  // The root creates the staging folder and files; with shared writing the
  // others open them there.
  void open_files() {
    std::string created;
    if (rank_ == root_) run_step(failure_, [&] { created = output_.create(); });
    agree();
    if (gather_) return;
    const auto all = transport_.all_gather(std::as_bytes(std::span(created)));
    const auto& theirs = all[static_cast<size_t>(root_)];
    created = std::string(reinterpret_cast<const char*>(theirs.data()), theirs.size());
    if (rank_ != root_) run_step(failure_, [&] { output_.join(created); });
    if (!objects_) return;
    parts_.emplace(assign_parts(plan_, output_.file_layouts(), output_.objects()->part_layouts(), blocks_,
                                transport_.size()));
    first_moved_.assign(blocks_.size() + 1, 0);
    for (size_t b = 0; b < blocks_.size(); ++b) {
      size_t moved = 0;
      for (const BlockSlice& slice : parts_->slices[b]) moved += slice.owner != blocks_[b].process ? size_t{1} : size_t{0};
      first_moved_[b + 1] = first_moved_[b] + moved;
    }
    if (2 * first_moved_.back() > Transport::kTagsPerOperation) {
      throw Error(ErrorCode::kUnsupported, fmt::format("{}: {} slices move between processes, more than one "
                                                       "operation can tag; raise the part or block size",
                                                       what_, first_moved_.back()));
    }
    agree();
    run_step(failure_, [&] { output_.objects()->own(parts_->owned_by(rank_)); });
    agree();
  }

  // Produces `block` into `out` (its bytes long).
  void produce(const ExportBlock& block, std::span<std::byte> out) {
    const ExportTensor& tensor = plan_.tensors[block.tensor];
    const auto start = Clock::now();
    try {
      producer_.produce(tensor, block.box, out);
    } catch (const Error& e) {
      throw e.with_context(fmt::format("tensor '{}' {}", tensor.spec.name, block.box.to_string()));
    }
    times_.produce += since(start);
    if (options_.progress) options_.progress(block.bytes);
  }
  void produce(const ExportBlock& block) {
    buffer_.resize(static_cast<size_t>(block.bytes));
    produce(block, buffer_);
  }

  void write(const ExportBlock& block, std::span<const std::byte> bytes) {
    const ExportTensor& tensor = plan_.tensors[block.tensor];
    try {
      output_.write(tensor.spec.name, block.box, bytes);
    } catch (const Error& e) {
      throw e.with_context(fmt::format("writing tensor '{}' {}", tensor.spec.name, block.box.to_string()));
    }
    written_ += block.bytes;
  }
  void write(const ExportBlock& block) {
    const auto start = Clock::now();
    write(block, buffer_);
    times_.write += since(start);
  }

  // Shared writing: this process's blocks are written by the queue's thread
  // while the next is produced here.
  void start_queue() {
    queue_.emplace(options_.blocks_in_flight,
                   [this](size_t index, std::span<const std::byte> bytes) { write(blocks_[index], bytes); });
  }

  void queue_own_block(size_t index) {
    const ExportBlock& block = blocks_[index];
    if (block.process != rank_) return;
    run_step(failure_, [&] {
      std::vector<std::byte> bytes = queue_->take(static_cast<size_t>(block.bytes));
      try {
        produce(block, bytes);
      } catch (...) {
        queue_->give_back(std::move(bytes));
        throw;
      }
      queue_->push(index, std::move(bytes));
    });
  }

  // Block `index` streamed to the root: a status word, then (when the owner
  // produced it) its bytes. Both sides go through every block even after a
  // failure, so that nobody waits for a message that never comes.
  void gather_block(size_t index) {
    const ExportBlock& block = blocks_[index];
    const Tag status_tag = tags_ + 2 * index;
    if (block.process == rank_ && rank_ == root_) {
      run_step(failure_, [&] {
        produce(block);
        write(block);
      });
    } else if (block.process == rank_) {
      run_step(failure_, [&] { produce(block); });
      const uint64_t status = failure_ ? 1 : 0;
      transport_.send(root_, status_tag, std::as_bytes(std::span(&status, 1)));
      if (status == 0) transport_.send(root_, status_tag + 1, buffer_);
    } else if (rank_ == root_) {
      uint64_t status = 0;
      transport_.recv(block.process, status_tag, std::as_writable_bytes(std::span(&status, 1)));
      if (status != 0) return;  // the owner reports its own failure when all agree
      buffer_.resize(static_cast<size_t>(block.bytes));
      transport_.recv(block.process, status_tag + 1, buffer_);
      run_step(failure_, [&] { write(block); });
    }
  }

  const ExportPlan& plan_;
  const std::vector<ExportBlock>& blocks_;
  TimedInput input_;
  BlockProducer producer_;  // after input_, which it reads
  const ExportOptions& options_;
  Transport& transport_;
  ExportOutput output_;
  int rank_ = 0;
  int root_ = 0;
  bool gather_ = false;
  bool objects_ = false;  // the output is in an object store
  std::string what_;
  std::optional<PartAssignment> parts_;  // objects: each block's slices and each part's owner
  std::vector<size_t> first_moved_;      // objects: moved slices before each block (their tags)
  std::vector<std::byte> slice_buffer_;  // objects: a slice received from its producer
  Failure failure_;
  Tag tags_ = 0;
  std::vector<std::byte> buffer_;  // gathering: the block in hand
  uint64_t written_ = 0;           // shared writing: counted on the queue's thread, read after it ends
  ExportTimes times_;
  std::optional<BlockWriteQueue> queue_;  // last: destroyed (its thread joined) first
};

}  // namespace

ExportResult run_export(const ExportPlan& plan, const std::vector<ExportBlock>& blocks, const ExportInput& input,
                        const storage::Location& out, const ExportOptions& options, Transport& transport,
                        const ExportSteps& steps) {
  if (2 * blocks.size() > Transport::kTagsPerOperation && options.gather_to && out.is_local()) {
    throw Error(ErrorCode::kUnsupported, fmt::format("exporting to {}: {} blocks are more than one gather can tag; "
                                                     "raise the block size", out.str(), blocks.size()));
  }
  return ExportRun(plan, blocks, input, out, options, transport).run(steps);
}

}  // namespace reshard::pipelines_detail
