#include "support/file_io.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>

namespace etc {
namespace {

std::string errno_text() {
  return std::strerror(errno);
}

class MappedBlob final : public Blob {
 public:
  MappedBlob(void* data, size_t size) : data_(data), size_(size) {}
  ~MappedBlob() override {
    if (data_ != nullptr) munmap(data_, size_);
  }
  MappedBlob(const MappedBlob&) = delete;
  MappedBlob& operator=(const MappedBlob&) = delete;
  std::span<const uint8_t> bytes() const override {
    return {static_cast<const uint8_t*>(data_), size_};
  }
  void release(size_t offset, size_t size) const override {
    // A private read-only mapping: dropped pages read back from the file unchanged.
    const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    const uintptr_t base = reinterpret_cast<uintptr_t>(data_);
    if (offset > size_ || size > size_ - offset) return;
    const uintptr_t begin = (base + offset + page - 1) / page * page;
    const uintptr_t end = (base + offset + size) / page * page;
    // The pointer from data_ (not cast back from the integer), the same address.
    if (end > begin)
      madvise(static_cast<uint8_t*>(data_) + (begin - base), end - begin, MADV_DONTNEED);
  }

 private:
  void* data_;
  size_t size_;
};

class OwnedBlob final : public Blob {
 public:
  explicit OwnedBlob(std::string bytes) : bytes_(std::move(bytes)) {}
  std::span<const uint8_t> bytes() const override {
    return {reinterpret_cast<const uint8_t*>(bytes_.data()), bytes_.size()};
  }

 private:
  std::string bytes_;
};

// Memory for results computed once: anonymous pages (huge pages advised when large).
class BufferBlob final : public Blob {
 public:
  explicit BufferBlob(size_t size) : size_(size) {
    if (size_ >= kHugePage) {
      void* p = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) throw std::bad_alloc();
      madvise(p, size_, MADV_HUGEPAGE);  // a hint: ignored where huge pages are off
      mapped_ = static_cast<uint8_t*>(p);
    } else {
      owned_.reset(new uint8_t[std::max<size_t>(size_, 1)]);
    }
  }
  ~BufferBlob() override {
    if (mapped_ != nullptr) munmap(mapped_, size_);
  }
  BufferBlob(const BufferBlob&) = delete;
  BufferBlob& operator=(const BufferBlob&) = delete;
  uint8_t* data() { return mapped_ != nullptr ? mapped_ : owned_.get(); }
  std::span<const uint8_t> bytes() const override {
    return {mapped_ != nullptr ? mapped_ : owned_.get(), size_};
  }

 private:
  static constexpr size_t kHugePage = size_t{2} << 20;
  size_t size_;
  uint8_t* mapped_ = nullptr;
  std::unique_ptr<uint8_t[]> owned_;
};

// Results spilled to an unlinked temporary file, mapped shared: the pages written stay in
// the file when the process lets them go.
class SpillBlob final : public Blob {
 public:
  SpillBlob(uint8_t* data, size_t size) : data_(data), size_(size) {}
  ~SpillBlob() override { munmap(data_, size_); }
  SpillBlob(const SpillBlob&) = delete;
  SpillBlob& operator=(const SpillBlob&) = delete;
  std::span<const uint8_t> bytes() const override { return {data_, size_}; }
  void release(size_t offset, size_t size) const override {
    // A shared file mapping: dropped pages (written or not) read back from the file.
    const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    if (offset > size_ || size > size_ - offset) return;
    const size_t begin = (offset + page - 1) / page * page, end = (offset + size) / page * page;
    if (end > begin) madvise(data_ + begin, end - begin, MADV_DONTNEED);
  }

 private:
  uint8_t* data_;
  size_t size_;
};

// Closes a descriptor on every path out of a function.
struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) close(fd);
  }
};

Result<int> open_regular_file(const std::string& path, size_t* size) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return Status(errno == ENOENT ? ErrorCode::kNotFound : ErrorCode::kInvalidInput,
                  "cannot open file: " + errno_text(), Location{.file = path});
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return invalid_input("not a regular file", Location{.file = path});
  }
  *size = static_cast<size_t>(st.st_size);
  return fd;
}

}  // namespace

Result<std::shared_ptr<const Blob>> map_file(const std::string& path) {
  size_t size = 0;
  ETC_ASSIGN_OR_RETURN(int fd, open_regular_file(path, &size));
  FdCloser closer{fd};
  if (size == 0) return make_blob(std::string());
  void* data = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (data == MAP_FAILED) {
    return invalid_input("cannot memory-map file: " + errno_text(), Location{.file = path});
  }
  return std::shared_ptr<const Blob>(std::make_shared<MappedBlob>(data, size));
}

bool release_pages(const void* data, size_t bytes) {
#ifdef MADV_PAGEOUT
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  auto* begin = const_cast<char*>(static_cast<const char*>(data));
  // The whole pages inside the range: from the first page boundary at or after data.
  const size_t head = (page - reinterpret_cast<uintptr_t>(begin) % page) % page;
  if (bytes <= head) return false;
  const size_t length = (bytes - head) / page * page;
  // A hint: an older kernel (EINVAL) keeps the pages.
  return length > 0 && madvise(begin + head, length, MADV_PAGEOUT) == 0;
#else
  (void)data;
  (void)bytes;
  return false;
#endif
}

std::shared_ptr<const Blob> make_blob(std::string bytes) {
  return std::make_shared<OwnedBlob>(std::move(bytes));
}

std::shared_ptr<const Blob> make_writable_blob(size_t size, uint8_t** data) {
  auto blob = std::make_shared<BufferBlob>(size);
  *data = blob->data();
  return blob;
}

std::shared_ptr<const Blob> make_spill_blob(size_t size, uint8_t** data) {
  const char* env = std::getenv("TMPDIR");
  const std::string dir = env != nullptr && *env != '\0' ? env : "/var/tmp";
  int fd = open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) {  // no O_TMPFILE there: a named file, unlinked at once
    std::string name = dir + "/etc-spill-XXXXXX";
    fd = mkostemp(name.data(), O_CLOEXEC);
    if (fd < 0) return nullptr;
    unlink(name.c_str());
  }
  FdCloser closer{fd};  // the mapping keeps the file
  // The blocks reserved now (a full disk refuses here, not with SIGBUS on a later write
  // through the mapping).
  if (size == 0 || posix_fallocate(fd, 0, static_cast<off_t>(size)) != 0) return nullptr;
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return nullptr;
  *data = static_cast<uint8_t*>(p);
  return std::make_shared<SpillBlob>(*data, size);
}

WritableArena::Piece WritableArena::allocate(size_t size) {
  constexpr size_t kAlign = 64, kChunk = size_t{64} << 20;
  const size_t start = (used_ + kAlign - 1) / kAlign * kAlign;
  if (chunk_ == nullptr || start > capacity_ || size > capacity_ - start) {
    // A memory chunk holds at most what is left of the budget; a piece that does not fit
    // in it starts spilling.
    const size_t left = in_memory_ - std::min(in_memory_, handed_out_);
    const bool spill = size > left;
    capacity_ = spill ? std::max(kChunk, size) : std::max(std::min(kChunk, left), size);
    chunk_ = nullptr;
    if (spill) chunk_ = make_spill_blob(capacity_, &base_);
    if (chunk_ == nullptr) chunk_ = make_writable_blob(capacity_, &base_);
    used_ = 0;
    return allocate(size);
  }
  used_ = start + size;
  handed_out_ += size;
  return Piece{chunk_, start, base_ + start};
}

Result<std::string> read_text_file(const std::string& path) {
  size_t size = 0;
  ETC_ASSIGN_OR_RETURN(int fd, open_regular_file(path, &size));
  FdCloser closer{fd};
  std::string out(size, '\0');
  size_t done = 0;
  while (done < size) {
    ssize_t n = read(fd, out.data() + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return invalid_input("cannot read file: " + errno_text(), Location{.file = path});
    done += static_cast<size_t>(n);
  }
  return out;
}

Status write_file_atomic(const std::string& path, std::span<const uint8_t> bytes) {
  std::string tmp = path + ".tmp." + std::to_string(getpid());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return invalid_input("cannot create output file: " + errno_text(), Location{.file = path});
  }
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      Status s = invalid_input("cannot write output file: " + errno_text(), Location{.file = path});
      close(fd);
      unlink(tmp.c_str());
      return s;
    }
    done += static_cast<size_t>(n);
  }
  if (close(fd) != 0 || rename(tmp.c_str(), path.c_str()) != 0) {
    Status s = invalid_input("cannot finish output file: " + errno_text(), Location{.file = path});
    unlink(tmp.c_str());
    return s;
  }
  return Status();
}

std::span<const uint8_t> PiecewiseBlob::bytes() const {
  std::call_once(gathered_once_, [this] {
    gathered_.assign(size_, '\0');
    for (const Piece& p : pieces_) {
      if (p.size == 0) continue;
      std::memcpy(gathered_.data() + p.offset, p.blob->bytes().data() + p.begin, p.size);
    }
  });
  return {reinterpret_cast<const uint8_t*>(gathered_.data()), gathered_.size()};
}

Result<std::unique_ptr<AtomicFileWriter>> AtomicFileWriter::create(const std::string& path) {
  std::string tmp = path + ".tmp." + std::to_string(getpid());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return invalid_input("cannot create output file: " + errno_text(), Location{.file = path});
  }
  return std::unique_ptr<AtomicFileWriter>(new AtomicFileWriter(path, std::move(tmp), fd));
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) unlink(tmp_.c_str());
}

Status AtomicFileWriter::write(std::span<const uint8_t> bytes) {
  if (fd_ < 0) return internal_error("write after close", Location{.file = path_});
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      return invalid_input("cannot write output file: " + errno_text(), Location{.file = path_});
    done += static_cast<size_t>(n);
  }
  written_ += bytes.size();
  return Status();
}

Status AtomicFileWriter::write_zeros(uint64_t count) {
  static const uint8_t kZeros[4096] = {};
  while (count > 0) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(count, sizeof kZeros));
    ETC_RETURN_IF_ERROR(write({kZeros, n}));
    count -= n;
  }
  return Status();
}

Status AtomicFileWriter::close() {
  if (fd_ < 0) return Status();
  int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0)
    return invalid_input("cannot finish output file: " + errno_text(), Location{.file = path_});
  return Status();
}

Status AtomicFileWriter::commit() {
  ETC_RETURN_IF_ERROR(close());
  if (rename(tmp_.c_str(), path_.c_str()) != 0) {
    return invalid_input("cannot finish output file: " + errno_text(), Location{.file = path_});
  }
  committed_ = true;
  return Status();
}

}  // namespace etc
