#include "export_run.h"

#include <cstring>
#include <optional>

#include <fmt/format.h>

#include "agreement.h"
#include "export_output.h"
#include "export_produce.h"
#include "reshard/layout/error.h"

namespace reshard::pipelines_detail {
namespace {

namespace fs = std::filesystem;

// One process's side of the export.
class ExportRun {
 public:
  ExportRun(const ExportPlan& plan, const std::vector<ExportBlock>& blocks, const ExportInput& input,
            const fs::path& out, const ExportOptions& options, Transport& transport)
      : plan_(plan), blocks_(blocks), input_(input), options_(options), transport_(transport),
        output_(out, plan, options.max_shard_size, options.replace), rank_(transport.rank()),
        root_(options.gather_to.value_or(0)), gather_(options.gather_to.has_value()),
        what_(fmt::format("exporting to {}", out.string())) {}

  ExportResult run(const ExportSteps& steps) {
    open_files();
    if (gather_) tags_ = transport_.begin_operation();
    size_t next = 0;
    for (size_t t = 0; t < plan_.tensors.size(); ++t) {
      if (steps.before) steps.before(t);
      for (; next < blocks_.size() && blocks_[next].tensor == t; ++next) {
        gather_ ? gather_block(next) : write_own_block(blocks_[next]);
      }
      if (steps.after) steps.after(t);
    }
    if (writes_here()) run_step(failure_, [&] { output_.sync(); });
    agree();
    if (rank_ == root_) run_step(failure_, [&] { output_.commit(); });
    agree();
    return {plan_.tensors.size(), plan_.merged, output_.files(), plan_.total_bytes(), written_};
  }

 private:
  bool writes_here() const { return !gather_ || rank_ == root_; }

  void agree() {
    const auto reports = exchange_reports(transport_, {failure_.message, {}});
    require_all_succeeded(reports, rank_, what_, failure_.error);
  }

  // The root creates the staging folder and files; with shared writing the
  // others open them there.
  void open_files() {
    fs::path staging;
    if (rank_ == root_) run_step(failure_, [&] { staging = output_.create(); });
    agree();
    if (gather_) return;
    const std::string mine = staging.string();
    const auto all = transport_.all_gather(std::as_bytes(std::span(mine)));
    const auto& theirs = all[static_cast<size_t>(root_)];
    staging = std::string(reinterpret_cast<const char*>(theirs.data()), theirs.size());
    if (rank_ != root_) run_step(failure_, [&] { output_.join(staging); });
  }

  void produce(const ExportBlock& block) {
    const ExportTensor& tensor = plan_.tensors[block.tensor];
    buffer_.resize(static_cast<size_t>(block.bytes));
    try {
      produce_block(plan_, tensor, block.box, input_, buffer_);
    } catch (const Error& e) {
      throw e.with_context(fmt::format("tensor '{}' {}", tensor.spec.name, block.box.to_string()));
    }
    if (options_.progress) options_.progress(block.bytes);
  }

  void write(const ExportBlock& block) {
    const ExportTensor& tensor = plan_.tensors[block.tensor];
    try {
      output_.write(tensor.spec.name, block.box, buffer_);
    } catch (const Error& e) {
      throw e.with_context(fmt::format("writing tensor '{}' {}", tensor.spec.name, block.box.to_string()));
    }
    written_ += block.bytes;
  }

  void write_own_block(const ExportBlock& block) {
    if (block.process != rank_) return;
    run_step(failure_, [&] {
      produce(block);
      write(block);
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
  const ExportInput& input_;
  const ExportOptions& options_;
  Transport& transport_;
  ExportOutput output_;
  int rank_ = 0;
  int root_ = 0;
  bool gather_ = false;
  std::string what_;
  Failure failure_;
  Tag tags_ = 0;
  std::vector<std::byte> buffer_;
  uint64_t written_ = 0;
};

}  // namespace

ExportResult run_export(const ExportPlan& plan, const std::vector<ExportBlock>& blocks, const ExportInput& input,
                        const fs::path& out, const ExportOptions& options, Transport& transport,
                        const ExportSteps& steps) {
  if (2 * blocks.size() > Transport::kTagsPerOperation && options.gather_to) {
    throw Error(ErrorCode::kUnsupported, fmt::format("exporting to {}: {} blocks are more than one gather can tag; "
                                                     "raise the block size", out.string(), blocks.size()));
  }
  return ExportRun(plan, blocks, input, out, options, transport).run(steps);
}

}  // namespace reshard::pipelines_detail
