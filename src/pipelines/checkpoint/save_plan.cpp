#include "pipelines/checkpoint/save_plan.h"

#include <algorithm>
#include <map>
#include <unordered_set>

#include <fmt/format.h>

#include "formats/json_escape.h"
#include "reshard/layout/error.h"

namespace reshard::pipelines_detail {

using formats_detail::BlockChecksums;
using formats_detail::json_quoted;

namespace {

struct Holders {
  Box box;
  std::vector<int> processes;        // distinct, in mesh order of their first device
  std::vector<DeviceId> device_of;   // each process's first device holding the box
};

// The distinct non-empty slices of an array and who holds each, in mesh order.
std::vector<Holders> distinct_slices(const SaveTensor& array) {
  const Mesh& mesh = array.sharding.mesh();
  const std::vector<Box> boxes = array.sharding.index_domains(array.shape);
  std::vector<Holders> slices;
  std::map<std::pair<std::vector<int64_t>, Shape>, size_t> index;
  for (size_t logical = 0; logical < boxes.size(); ++logical) {
    const Box& box = boxes[logical];
    if (box.empty()) continue;
    const auto [it, inserted] = index.try_emplace({box.origin(), box.shape()}, slices.size());
    if (inserted) slices.push_back({box, {}, {}});
    Holders& holders = slices[it->second];
    const DeviceId device = mesh.devices()[logical];
    const int process = array.topology.process_of(device);
    if (std::find(holders.processes.begin(), holders.processes.end(), process) == holders.processes.end()) {
      holders.processes.push_back(process);
      holders.device_of.push_back(device);
    }
  }
  return slices;
}

}  // namespace

std::string data_file_name(int process) { return fmt::format("data-{:05d}.safetensors", process); }

SaveTensor SaveTensor::of(const NamedArray& named) {
  return {named.name,       named.array.dtype(),    named.array.shape(), named.array.sharding(),
          named.array.topology(), named.metadata};
}

SavePlan SavePlan::make(std::span<const NamedArray> arrays, int num_processes) {
  std::vector<SaveTensor> tensors;
  tensors.reserve(arrays.size());
  for (const NamedArray& named : arrays) tensors.push_back(SaveTensor::of(named));
  return make(tensors, num_processes);
}

SavePlan SavePlan::make(std::span<const SaveTensor> arrays, int num_processes) {
  SavePlan plan;
  plan.by_process_.resize(static_cast<size_t>(num_processes));
  plan.files_.resize(static_cast<size_t>(num_processes));
  plan.bytes_.assign(static_cast<size_t>(num_processes), 0);
  std::unordered_set<std::string_view> names;
  size_t turn = 0;
  for (size_t a = 0; a < arrays.size(); ++a) {
    const SaveTensor& named = arrays[a];
    if (!names.insert(named.name).second) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("array {} is given twice", json_quoted(named.name)));
    }
    if (named.topology.num_processes() != num_processes) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("array {}: its topology has {} processes, the job {}", json_quoted(named.name),
                              named.topology.num_processes(), num_processes));
    }
    for (const Holders& holders : distinct_slices(named)) {
      const uint64_t bytes = checkpoint::dense_bytes(named.dtype, holders.box.shape());
      // The least-loaded holder; among equals, the turn goes round.
      size_t best = turn % holders.processes.size();
      for (size_t k = 0; k < holders.processes.size(); ++k) {
        const size_t candidate = (turn + k) % holders.processes.size();
        if (plan.bytes_[static_cast<size_t>(holders.processes[candidate])] <
            plan.bytes_[static_cast<size_t>(holders.processes[best])]) {
          best = candidate;
        }
      }
      ++turn;
      const int writer = holders.processes[best];
      plan.bytes_[static_cast<size_t>(writer)] += bytes;
      plan.by_process_[static_cast<size_t>(writer)].push_back(plan.chunks_.size());
      plan.chunks_.push_back({a, named.dtype, holders.box, writer, holders.device_of[best],
                              checkpoint::chunk_key(named.name, holders.box)});
    }
  }
  for (int p = 0; p < num_processes; ++p) {
    auto& mine = plan.by_process_[static_cast<size_t>(p)];
    if (mine.empty()) continue;
    std::vector<safetensors::TensorSpec> specs;
    for (size_t c : mine) {
      const PlannedChunk& chunk = plan.chunks_[c];
      specs.push_back({chunk.key, chunk.dtype, safetensors::dims_of(chunk.box.shape())});
    }
    plan.files_[static_cast<size_t>(p)] = safetensors::FileLayout::plan(std::move(specs), std::nullopt);
    // Write in the file's byte order, so the file is written front to back.
    const safetensors::Header& header = plan.files_[static_cast<size_t>(p)]->header();
    std::sort(mine.begin(), mine.end(), [&](size_t x, size_t y) {
      return header.at(plan.chunks_[x].key).begin < header.at(plan.chunks_[y].key).begin;
    });
  }
  return plan;
}

checkpoint::Manifest SavePlan::manifest(std::span<const SaveTensor> arrays, std::span<const BlockChecksums> checksums,
                                        uint64_t block_bytes, std::optional<safetensors::Metadata> metadata) const {
  checkpoint::Manifest manifest;
  manifest.metadata = std::move(metadata);
  manifest.block_bytes = block_bytes;
  for (size_t p = 0; p < files_.size(); ++p) {
    if (files_[p]) manifest.files.push_back({data_file_name(static_cast<int>(p)), files_[p]->file_size()});
  }
  for (const SaveTensor& named : arrays) {
    manifest.tensors.push_back({named.name, named.dtype, named.shape, named.sharding.to_string(), named.metadata, {}});
  }
  for (size_t c = 0; c < chunks_.size(); ++c) {
    const PlannedChunk& chunk = chunks_[c];
    const safetensors::FileLayout& layout = *files_[static_cast<size_t>(chunk.writer)];
    const safetensors::TensorInfo& info = layout.header().at(chunk.key);
    manifest.tensors[chunk.array].chunks.push_back({chunk.box, data_file_name(chunk.writer), chunk.key,
                                                    layout.header().file_offset(info), info.byte_size(),
                                                    checksums[c].whole, checksums[c].blocks});
  }
  return manifest;
}

uint64_t SavePlan::fingerprint() const {
  // FNV-1a over the fields, in plan order.
  uint64_t hash = 0xcbf29ce484222325ull;
  const auto mix = [&hash](std::string_view bytes) {
    for (const char c : bytes) hash = (hash ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
  };
  for (const PlannedChunk& chunk : chunks_) {
    mix(chunk.key);
    mix(dtype_name(chunk.dtype));
    for (const int64_t at : chunk.box.origin()) mix(std::to_string(at) + ",");
    for (const int64_t extent : chunk.box.shape()) mix(std::to_string(extent) + ";");
    mix(std::to_string(chunk.writer) + "|");
  }
  return hash;
}

}  // namespace reshard::pipelines_detail
