#include "reshard/formats/safetensors_reader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "box_bytes.h"
#include "formats/json_escape.h"
#include "layout/checked.h"
#include "reshard/layout/error.h"
#include "reshard/storage/open_store.h"
#include "reshard/storage/storage_error.h"

namespace reshard::safetensors {

using formats_detail::json_quoted;
using layout_detail::checked_add;

namespace {

// Box reads with plain reads join runs separated by less than this many
// bytes into one read, and never read more than kMaxJoinedRead at once.
constexpr uint64_t kMaxGap = 4096;
constexpr uint64_t kMaxJoinedRead = uint64_t{1} << 20;

[[noreturn]] void fail_io(std::string_view action, const std::filesystem::path& path, int error) {
  throw Error(ErrorCode::kIo, fmt::format("{} {}: {}", action, path.string(), std::strerror(error)));
}

// The tensor as this header has it: a TensorInfo from elsewhere (another file,
// a stale copy) must not steer reads outside the data buffer.
const TensorInfo& own_tensor(const Header& header, const TensorInfo& tensor,
                             const std::filesystem::path& path) {
  const auto tensors = header.tensors();
  if (!tensors.empty() && &tensor >= tensors.data() && &tensor < tensors.data() + tensors.size()) {
    return tensor;
  }
  const TensorInfo* mine = header.find(tensor.name);
  if (mine == nullptr || mine->begin != tensor.begin || mine->end != tensor.end ||
      mine->dtype != tensor.dtype || mine->shape != tensor.shape) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: tensor {} is not a tensor of this file", path.string(),
                            json_quoted(tensor.name)));
  }
  return *mine;
}

}  // namespace

struct File::State {
  storage::Location location;
  std::filesystem::path path;  // the location's text, for messages
  ReadMode mode = ReadMode::kMmap;
  int fd = -1;
  std::shared_ptr<storage::Store> store;  // objects only: read through it by ranges
  uint64_t size = 0;
  const std::byte* mapping = nullptr;  // the whole file in kMmap mode
  Header header;

  State(storage::Location where, ReadMode m) : location(std::move(where)), path(location.str()), mode(m) {}
  State(const State&) = delete;
  State& operator=(const State&) = delete;
  ~State() {
    if (mapping != nullptr) ::munmap(const_cast<std::byte*>(mapping), size);
    if (fd >= 0) ::close(fd);
  }

  // Reads exactly out.size() bytes at `offset`.
  void pread_all(uint64_t offset, std::span<std::byte> out) const {
    if (store) {
      store->read(location, offset, out);
      return;
    }
    while (!out.empty()) {
      const ssize_t n = ::pread(fd, out.data(), out.size(), static_cast<off_t>(offset));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) fail_io("reading", path, errno);
      if (n == 0) {
        throw Error(ErrorCode::kIo, fmt::format("reading {}: the file ended at byte {}, it shrank "
                                                "after it was opened",
                                                path.string(), offset));
      }
      out = out.subspan(static_cast<size_t>(n));
      offset += static_cast<uint64_t>(n);
    }
  }

  // Copies file bytes [offset, offset + out.size()) by whichever mode is open.
  void copy(uint64_t offset, std::span<std::byte> out) const {
    if (mapping != nullptr) {
      if (!out.empty()) std::memcpy(out.data(), mapping + offset, out.size());
    } else {
      pread_all(offset, out);
    }
  }

  void open_file() {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail_io("opening", path, errno);
    struct stat info {};
    if (::fstat(fd, &info) != 0) fail_io("reading the size of", path, errno);
    if (!S_ISREG(info.st_mode)) {
      throw Error(ErrorCode::kIo, fmt::format("opening {}: not a regular file", path.string()));
    }
    size = static_cast<uint64_t>(info.st_size);
  }

  // An object: its size from the store; its bytes are read by ranges.
  void open_object() {
    store = storage::open_store(location);
    const std::optional<storage::ObjectInfo> info = store->stat(location);
    if (!info) {
      const bool folder = !store->list(location).empty();
      throw Error(storage::kObjectNotFound, fmt::format("opening {}: {}", path.string(),
                                                        folder ? "a folder, not a file" : "no such object"));
    }
    size = info->size;
    mode = ReadMode::kPread;
  }

  void map_file() {
    if (size == 0) return;
    void* address = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    if (address == MAP_FAILED) fail_io("mapping", path, errno);
    mapping = static_cast<const std::byte*>(address);
  }

  void read_header() {
    const std::string file = path.string();
    if (mapping != nullptr) {
      header = parse_header({mapping, size}, size, file);
      return;
    }
    std::array<std::byte, kLengthPrefixBytes> prefix{};
    const auto prefix_bytes = static_cast<size_t>(std::min<uint64_t>(size, kLengthPrefixBytes));
    pread_all(0, std::span(prefix).first(prefix_bytes));
    const uint64_t length = parse_length_prefix(std::span(prefix).first(prefix_bytes), size, file);
    std::vector<std::byte> json(static_cast<size_t>(length));
    pread_all(kLengthPrefixBytes, json);
    header = parse_header_json(json, size, file);
  }
};

File::File(std::shared_ptr<const State> state) : state_(std::move(state)) {}

File File::open(const storage::Location& where, ReadMode mode) {
  auto state = std::make_shared<State>(where, mode);
  if (where.is_local()) {
    state->open_file();
    if (mode == ReadMode::kMmap) state->map_file();
  } else {
    state->open_object();
  }
  state->read_header();
  return File(std::move(state));
}

const storage::Location& File::location() const { return state_->location; }

const std::filesystem::path& File::path() const { return state_->path; }

ReadMode File::mode() const { return state_->mode; }

const Header& File::header() const { return state_->header; }

std::span<const std::byte> File::view(const TensorInfo& given) const {
  const TensorInfo& tensor = own_tensor(header(), given, path());
  if (state_->mode != ReadMode::kMmap) {
    throw Error(ErrorCode::kUnsupported,
                fmt::format("{}: tensor {}: views need a memory-mapped file; this one was opened "
                            "for plain reads",
                            path().string(), json_quoted(tensor.name)));
  }
  if (tensor.byte_size() == 0) return {};
  return {state_->mapping + header().file_offset(tensor), static_cast<size_t>(tensor.byte_size())};
}

void File::read(const TensorInfo& given, uint64_t offset, std::span<std::byte> out) const {
  const TensorInfo& tensor = own_tensor(header(), given, path());
  const uint64_t end = checked_add(offset, static_cast<uint64_t>(out.size()), "read range end");
  if (end > tensor.byte_size()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: tensor {}: bytes [{}, {}) pass its end at {}", path().string(),
                            json_quoted(tensor.name), offset, end, tensor.byte_size()));
  }
  state_->copy(header().file_offset(tensor) + offset, out);
}

void File::read(const TensorInfo& tensor, std::span<std::byte> out) const {
  if (out.size() != tensor.byte_size()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: tensor {} has {} bytes, the buffer {}", path().string(),
                            json_quoted(tensor.name), tensor.byte_size(), out.size()));
  }
  read(tensor, 0, out);
}

uint64_t File::box_bytes(DType dtype, const Box& box) { return formats_detail::box_byte_size(dtype, box); }

namespace {

// Gathers nearby runs into one plain read through a bounce buffer, so a
// strided box costs few system calls.
class JoinedReader {
 public:
  JoinedReader(const std::function<void(uint64_t, std::span<std::byte>)>& copy, uint64_t base,
               std::span<std::byte> out)
      : copy_(copy), base_(base), out_(out) {}

  void add(const formats_detail::ByteRun& run) {
    if (!group_.empty()) {
      const uint64_t group_end = group_.back().tensor_offset + group_.back().length;
      const uint64_t joined = run.tensor_offset + run.length - group_.front().tensor_offset;
      if (run.tensor_offset - group_end > kMaxGap || joined > kMaxJoinedRead) flush();
    }
    group_.push_back(run);
  }

  void flush() {
    if (group_.size() == 1) {
      const formats_detail::ByteRun& run = group_.front();
      copy_(base_ + run.tensor_offset, out_.subspan(run.box_offset, run.length));
    } else if (!group_.empty()) {
      const uint64_t first = group_.front().tensor_offset;
      bounce_.resize(group_.back().tensor_offset + group_.back().length - first);
      copy_(base_ + first, bounce_);
      for (const formats_detail::ByteRun& run : group_) {
        std::memcpy(out_.data() + run.box_offset, bounce_.data() + (run.tensor_offset - first),
                    run.length);
      }
    }
    group_.clear();
  }

 private:
  const std::function<void(uint64_t, std::span<std::byte>)>& copy_;
  uint64_t base_;
  std::span<std::byte> out_;
  std::vector<formats_detail::ByteRun> group_;
  std::vector<std::byte> bounce_;
};

}  // namespace

void File::read_box(const TensorInfo& given, const Box& box, std::span<std::byte> out) const {
  const TensorInfo& tensor = own_tensor(header(), given, path());
  try {
    const uint64_t expected = formats_detail::box_byte_size(tensor.dtype, box);
    if (out.size() != expected) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("tensor {}: box {} has {} bytes, the buffer {}", json_quoted(tensor.name),
                              box.to_string(), expected, out.size()));
    }
    const uint64_t base = header().file_offset(tensor);
    if (state_->mapping != nullptr) {
      formats_detail::for_each_byte_run(tensor, box, [&](const formats_detail::ByteRun& run) {
        std::memcpy(out.data() + run.box_offset, state_->mapping + base + run.tensor_offset, run.length);
      });
      return;
    }
    if (state_->store) {
      // One call: the store joins nearby runs and fetches many at once.
      std::vector<storage::RangeRead> ranges;
      formats_detail::for_each_byte_run(tensor, box, [&](const formats_detail::ByteRun& run) {
        ranges.push_back({base + run.tensor_offset, out.subspan(run.box_offset, run.length)});
      });
      state_->store->read_ranges(state_->location, ranges);
      return;
    }
    const std::function<void(uint64_t, std::span<std::byte>)> copy =
        [&](uint64_t offset, std::span<std::byte> into) { state_->pread_all(offset, into); };
    JoinedReader reader(copy, base, out);
    formats_detail::for_each_byte_run(tensor, box, [&](const formats_detail::ByteRun& run) { reader.add(run); });
    reader.flush();
  } catch (const Error& e) {
    if (e.code() == ErrorCode::kIo) throw;
    throw e.with_context(path().string());
  }
}

}  // namespace reshard::safetensors
