// Reading whole files and memory-mapping them, with errors as Status.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "support/status.h"

namespace etc {

// An immutable byte buffer: either a read-only memory map of a file or owned bytes.
// Shared by everything that points into it (constants reference their weight file).
class Blob {
 public:
  virtual ~Blob() = default;
  virtual std::span<const uint8_t> bytes() const = 0;
  // A hint that bytes [offset, offset + size) will not be read soon: a memory map drops the
  // whole pages inside the range from the process (they are read again from the file on the
  // next access, unchanged). Never changes what bytes() returns.
  virtual void release(size_t /*offset*/, size_t /*size*/) const {}
};

// Bytes laid out from pieces of other blobs, with zeros between them (a .pte constant
// segment assembled from weights that stay in their mapped files). Writers stream the
// pieces (pieces()); bytes() gathers them into one buffer on first use only.
class PiecewiseBlob final : public Blob {
 public:
  struct Piece {
    uint64_t offset = 0;  // where the piece starts in this blob
    std::shared_ptr<const Blob> blob;
    size_t begin = 0;  // the piece is blob->bytes()[begin, begin + size)
    size_t size = 0;
  };
  // Pieces in increasing, non-overlapping offset order, all within `size`.
  PiecewiseBlob(std::vector<Piece> pieces, uint64_t size)
      : pieces_(std::move(pieces)), size_(size) {}
  std::span<const uint8_t> bytes() const override;
  const std::vector<Piece>& pieces() const { return pieces_; }
  uint64_t size() const { return size_; }

 private:
  std::vector<Piece> pieces_;
  uint64_t size_;
  mutable std::once_flag gathered_once_;
  mutable std::string gathered_;
};

// Writes a file through a temporary file in the same folder: nothing appears at `path`
// until commit() renames it into place; the destructor removes an uncommitted temporary.
class AtomicFileWriter {
 public:
  static Result<std::unique_ptr<AtomicFileWriter>> create(const std::string& path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  Status write(std::span<const uint8_t> bytes);
  Status write_zeros(uint64_t count);
  uint64_t written() const { return written_; }
  // Closes the temporary (its contents can then be read at temp_path()).
  Status close();
  const std::string& temp_path() const { return tmp_; }
  Status commit();  // close() if needed, then rename into place

 private:
  AtomicFileWriter(std::string path, std::string tmp, int fd)
      : path_(std::move(path)), tmp_(std::move(tmp)), fd_(fd) {}
  std::string path_, tmp_;
  int fd_ = -1;
  uint64_t written_ = 0;
  bool committed_ = false;
};

// Maps `path` read-only. Empty files give an empty blob.
Result<std::shared_ptr<const Blob>> map_file(const std::string& path);

// Wraps owned bytes.
std::shared_ptr<const Blob> make_blob(std::string bytes);

// Tells the kernel that the whole pages of [data, data + bytes) are not needed for now: a
// constant that a kernel copied into its own layout (a float32 weight packed at its first
// product). Their contents stay valid: pages of a mapped file are dropped and read again
// from the file if touched (Linux's MADV_PAGEOUT; anonymous memory goes to swap, if any).
// Only a hint: nothing happens where the kernel does not take it. Whether it took it (false:
// no whole page in the range, or a kernel without the advice).
bool release_pages(const void* data, size_t bytes);

// A blob of `size` bytes to fill once, through `*data`, before anyone reads it (constants
// computed at export). The bytes start unspecified. A large one is an anonymous mapping with
// transparent huge pages advised: filling 40 MB of folded weights takes a few dozen page
// faults instead of ten thousand. Throws std::bad_alloc when memory cannot be had.
std::shared_ptr<const Blob> make_writable_blob(size_t size, uint8_t** data);

// A blob of `size` bytes like make_writable_blob's, backed by an unlinked temporary file
// (in $TMPDIR, else /var/tmp) mapped shared: release() drops its pages from the process and
// the next read brings the written bytes back from the file, so results larger than memory
// can be computed and written out piece by piece. Null when no such file can be made.
std::shared_ptr<const Blob> make_spill_blob(size_t size, uint8_t** data);

// Hands out writable pieces of large shared blobs (make_writable_blob chunks of at least
// 64 MiB, of which only the pieces handed out are ever touched), so that many medium-sized
// results (a model's transposed weights, 0.5-3 MB each) fill huge pages too. A piece lives
// as long as its chunk, which lives as long as any piece of it is referenced. Once more
// than `in_memory` bytes have been handed out, chunks are make_spill_blob's (where one can
// be made): a piece released after use then stays out of the process.
class WritableArena {
 public:
  struct Piece {
    std::shared_ptr<const Blob> blob;
    size_t offset = 0;
    uint8_t* data = nullptr;
  };
  explicit WritableArena(size_t in_memory = SIZE_MAX) : in_memory_(in_memory) {}
  Piece allocate(size_t size);

 private:
  std::shared_ptr<const Blob> chunk_;
  uint8_t* base_ = nullptr;
  size_t used_ = 0, capacity_ = 0;
  size_t in_memory_, handed_out_ = 0;
};

Result<std::string> read_text_file(const std::string& path);

// Writes via a temporary file in the same folder and a rename, so a failed or interrupted
// write never leaves a partial file at `path`.
Status write_file_atomic(const std::string& path, std::span<const uint8_t> bytes);

}  // namespace etc
