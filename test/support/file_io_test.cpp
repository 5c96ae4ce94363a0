#include "support/file_io.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <unistd.h>

namespace etc {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("etc_file_io_" + std::to_string(getpid()) + "_" + name))
      .string();
}

TEST_CASE("write_file_atomic writes the bytes and leaves no temporary file") {
  std::string p = temp_path("out.bin");
  std::string data = "hello\0world";
  REQUIRE(write_file_atomic(p, {reinterpret_cast<const uint8_t*>(data.data()), data.size()}).ok());
  Result<std::string> back = read_text_file(p);
  REQUIRE(back.ok());
  CHECK(*back == data);
  Result<std::shared_ptr<const Blob>> mapped = map_file(p);
  REQUIRE(mapped.ok());
  CHECK((*mapped)->bytes().size() == data.size());
  for (const auto& e :
       std::filesystem::directory_iterator(std::filesystem::path(p).parent_path())) {
    CHECK(e.path().filename().string().find("etc_file_io_" + std::to_string(getpid()) +
                                            "_out.bin.tmp") == std::string::npos);
  }
  std::filesystem::remove(p);
}

TEST_CASE("released pages of a mapped file leave memory and read back the same bytes") {
  // 4 MiB of random bytes, mapped; every page read (resident), then released: the kernel
  // drops the file's clean pages, and reading them again gives the same bytes. A few bytes
  // off each end stay (only whole pages inside the range are released). The file is written
  // and synced by another process, as a program written before a run is (Linux keeps the
  // pages this process has just written, synced or not).
  std::string p = temp_path("pages.bin");
  const size_t size = size_t{4} << 20;
  REQUIRE(std::system(("dd if=/dev/urandom of=" + p +  // NOLINT(cert-env33-c)
                       " bs=1M count=4 conv=fsync status=none")
                          .c_str()) == 0);
  Result<std::shared_ptr<const Blob>> mapped = map_file(p);
  REQUIRE(mapped.ok());
  const std::span<const uint8_t> bytes = (*mapped)->bytes();
  REQUIRE(bytes.size() == size);
  uint64_t sum = 0;
  for (size_t i = 0; i < size; i += 4096)
    sum += bytes[i];
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t pages = size / page;
  auto resident = [&] {
    std::vector<unsigned char> in(pages);
    REQUIRE(mincore(const_cast<uint8_t*>(bytes.data()), size, in.data()) == 0);
    return std::count_if(in.begin(), in.end(), [](unsigned char c) { return (c & 1) != 0; });
  };
  REQUIRE(resident() == static_cast<std::ptrdiff_t>(pages));
  // A hint: Linux takes it from 5.4 on (older kernels refuse MADV_PAGEOUT); it keeps some
  // pages (here half of them: pages it holds in larger folios), but a quarter at least go.
  utsname u{};
  REQUIRE(uname(&u) == 0);
  int major = 0, minor = 0;
  REQUIRE(std::sscanf(u.release, "%d.%d", &major, &minor) == 2);  // NOLINT(cert-err34-c)
  const bool kernel_takes_it = major > 5 || (major == 5 && minor >= 4);
  const bool taken = release_pages(bytes.data() + 7, size - 14);
  CHECK(taken == kernel_takes_it);
  if (taken) CHECK(resident() <= static_cast<std::ptrdiff_t>(pages * 3 / 4));
  // Read again (from the file), the same bytes as the file's (read after the check above:
  // pages this process has just read twice stay).
  Result<std::string> data = read_text_file(p);
  REQUIRE(data.ok());
  REQUIRE(data->size() == size);
  CHECK(std::memcmp(bytes.data(), data->data(), size) == 0);
  CHECK(sum > 0);
  mapped->reset();
  std::filesystem::remove(p);

  // Ordinary (anonymous) memory keeps its bytes: the advice never discards them.
  std::vector<uint8_t> heap(size);
  for (size_t i = 0; i < size; ++i)
    heap[i] = static_cast<uint8_t>((i * 2654435761u) >> 13);
  const std::vector<uint8_t> copy = heap;
  (void)release_pages(heap.data(), heap.size());
  CHECK(heap == copy);
  // Less than a page holds no whole page: nothing to advise.
  CHECK_FALSE(release_pages(heap.data() + 1, 100));
}

TEST_CASE("a write into a missing folder fails cleanly") {
  Status s = write_file_atomic("/nonexistent-etc-dir/out.bin", {});
  REQUIRE_FALSE(s.ok());
  CHECK(s.location().file == "/nonexistent-etc-dir/out.bin");
  CHECK(s.message().rfind("cannot create output file", 0) == 0);
}

TEST_CASE("missing files are kNotFound, folders are invalid input") {
  CHECK(read_text_file("/nonexistent-etc-file").status().code() == ErrorCode::kNotFound);
  CHECK(map_file("/nonexistent-etc-file").status().code() == ErrorCode::kNotFound);
  Result<std::string> dir = read_text_file("/tmp");
  REQUIRE_FALSE(dir.ok());
  CHECK(dir.status().message() == "not a regular file");
}

TEST_CASE("releasing a mapped range keeps its bytes, the streaming writer is atomic") {
  std::string p = temp_path("pages.bin");
  std::string data(3 * 4096 + 123, '\0');
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = static_cast<char>(i * 7 + 1);
  {
    Result<std::unique_ptr<AtomicFileWriter>> w = AtomicFileWriter::create(p);
    REQUIRE(w.ok());
    REQUIRE((*w)->write({reinterpret_cast<const uint8_t*>(data.data()), 4096}).ok());
    REQUIRE((*w)->write({reinterpret_cast<const uint8_t*>(data.data()) + 4096, data.size() - 4096})
                .ok());
    CHECK_FALSE(std::filesystem::exists(p));  // nothing at the path before commit
    REQUIRE((*w)->commit().ok());
  }
  Result<std::shared_ptr<const Blob>> blob = map_file(p);
  REQUIRE(blob.ok());
  std::span<const uint8_t> before = (*blob)->bytes();
  (*blob)->release(100, 2 * 4096 + 50);  // drops the whole pages inside; a hint only
  (*blob)->release(0, (*blob)->bytes().size());
  (*blob)->release(5, 1u << 30);  // out of range: ignored
  std::span<const uint8_t> after = (*blob)->bytes();
  CHECK(after.data() == before.data());
  CHECK(std::string(reinterpret_cast<const char*>(after.data()), after.size()) == data);
  std::filesystem::remove(p);
  // An uncommitted writer leaves nothing behind.
  {
    Result<std::unique_ptr<AtomicFileWriter>> w = AtomicFileWriter::create(p);
    REQUIRE(w.ok());
    REQUIRE((*w)->write_zeros(10000).ok());
    CHECK((*w)->written() == 10000);
  }
  CHECK_FALSE(std::filesystem::exists(p));
}

TEST_CASE("empty files map to an empty blob") {
  std::string p = temp_path("empty.bin");
  REQUIRE(write_file_atomic(p, {}).ok());
  Result<std::shared_ptr<const Blob>> m = map_file(p);
  REQUIRE(m.ok());
  CHECK((*m)->bytes().empty());
  std::filesystem::remove(p);
}

}  // namespace
}  // namespace etc

TEST_CASE("a writable arena hands out aligned, disjoint pieces that keep their bytes") {
  etc::WritableArena arena;
  std::vector<etc::WritableArena::Piece> pieces;
  std::vector<size_t> sizes{100, size_t{3} << 20, 1, size_t{70} << 20, 4096, size_t{60} << 20};
  for (size_t i = 0; i < sizes.size(); ++i) {
    pieces.push_back(arena.allocate(sizes[i]));
    std::memset(pieces.back().data, static_cast<int>(i + 1), sizes[i]);
  }
  for (size_t i = 0; i < pieces.size(); ++i) {
    INFO("piece " << i);
    const etc::WritableArena::Piece& p = pieces[i];
    CHECK(p.offset % 64 == 0);
    CHECK(p.data == p.blob->bytes().data() + p.offset);
    REQUIRE(p.offset + sizes[i] <= p.blob->bytes().size());
    // Every byte still holds what was written: no later piece overlapped it.
    std::span<const uint8_t> b = p.blob->bytes().subspan(p.offset, sizes[i]);
    CHECK(std::all_of(b.begin(), b.end(), [&](uint8_t x) { return x == i + 1; }));
  }
  CHECK(pieces[0].blob == pieces[1].blob);  // small and medium pieces share a chunk
  CHECK(pieces[3].blob != pieces[0].blob);  // a piece larger than a chunk gets its own
}

TEST_CASE("past its in-memory budget an arena spills to a file: released pieces keep bytes") {
  // Budget 1 MiB: the first chunk is memory, the chunks after it spill files. A spilled
  // piece released (its pages dropped from the process) reads back what was written; an
  // anonymous mapping would read zeros.
  etc::WritableArena arena(size_t{1} << 20);
  const size_t size = size_t{3} << 20;
  std::vector<etc::WritableArena::Piece> pieces;
  for (size_t i = 0; i < 3; ++i) {
    pieces.push_back(arena.allocate(i == 0 ? size : (size_t{65} << 20)));
    for (size_t k = 0; k < size; ++k)
      pieces.back().data[k] = static_cast<uint8_t>(k * 7 + i);
  }
  CHECK(pieces[1].blob != pieces[0].blob);
  for (size_t i = 0; i < pieces.size(); ++i) {
    INFO("piece " << i);
    const etc::WritableArena::Piece& p = pieces[i];
    p.blob->release(p.offset, size);
    std::span<const uint8_t> b = p.blob->bytes().subspan(p.offset, size);
    size_t wrong = 0;
    for (size_t k = 0; k < size; ++k)
      wrong += b[k] != static_cast<uint8_t>(k * 7 + i);
    CHECK(wrong == 0);
  }
  // A spill blob made directly, and one where no temporary file can be made: null, and the
  // arena then keeps its chunks in memory.
  uint8_t* data = nullptr;
  std::shared_ptr<const etc::Blob> spill = etc::make_spill_blob(8192, &data);
  REQUIRE(spill != nullptr);
  std::memset(data, 0x5a, 8192);
  spill->release(0, 8192);
  CHECK(std::all_of(spill->bytes().begin(), spill->bytes().end(),
                    [](uint8_t x) { return x == 0x5a; }));
  const char* old = std::getenv("TMPDIR");
  const std::string saved = old != nullptr ? old : "";
  setenv("TMPDIR", "/nonexistent/etc-no-such-folder", 1);
  CHECK(etc::make_spill_blob(8192, &data) == nullptr);
  etc::WritableArena fallback(0);
  etc::WritableArena::Piece p = fallback.allocate(4096);
  std::memset(p.data, 3, 4096);
  CHECK(p.blob->bytes()[p.offset + 4095] == 3);
  if (old != nullptr) {
    setenv("TMPDIR", saved.c_str(), 1);
  } else {
    unsetenv("TMPDIR");
  }
}
