#include "frontends/torch_export/pt2_archive.h"

#include <minizip/unzip.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <system_error>
#include <thread>
#include <vector>

namespace etc::torch_import {

namespace {

// minizip reads through these callbacks from the mapped bytes: no file is opened twice,
// and the fuzz harness reads from memory the same way.
struct MemoryStream {
  std::span<const uint8_t> bytes;
  uint64_t pos = 0;
};

voidpf ZCALLBACK mem_open(voidpf opaque, const void* /*name*/, int /*mode*/) {
  static_cast<MemoryStream*>(opaque)->pos = 0;
  return opaque;
}
uLong ZCALLBACK mem_read(voidpf /*opaque*/, voidpf stream, void* buf, uLong size) {
  auto* s = static_cast<MemoryStream*>(stream);
  uint64_t left = s->pos < s->bytes.size() ? s->bytes.size() - s->pos : 0;
  uLong n = static_cast<uLong>(std::min<uint64_t>(size, left));
  if (n > 0) std::memcpy(buf, s->bytes.data() + s->pos, n);
  s->pos += n;
  return n;
}
uLong ZCALLBACK mem_write(voidpf, voidpf, const void*, uLong) {
  return 0;
}
ZPOS64_T ZCALLBACK mem_tell(voidpf /*opaque*/, voidpf stream) {
  return static_cast<MemoryStream*>(stream)->pos;
}
long ZCALLBACK mem_seek(voidpf /*opaque*/, voidpf stream, ZPOS64_T offset, int origin) {
  auto* s = static_cast<MemoryStream*>(stream);
  uint64_t base = 0;
  switch (origin) {
    case ZLIB_FILEFUNC_SEEK_SET:
      base = 0;
      break;
    case ZLIB_FILEFUNC_SEEK_CUR:
      base = s->pos;
      break;
    case ZLIB_FILEFUNC_SEEK_END:
      base = s->bytes.size();
      break;
    default:
      return -1;
  }
  if (offset > s->bytes.size() || base > s->bytes.size() - offset) return -1;
  s->pos = base + offset;
  return 0;
}
int ZCALLBACK mem_close(voidpf, voidpf) {
  return 0;
}
int ZCALLBACK mem_error(voidpf, voidpf) {
  return 0;
}

// One open minizip handle over a MemoryStream, closed on scope exit.
class Unzip {
 public:
  explicit Unzip(std::span<const uint8_t> bytes) : stream_{bytes, 0} {
    zlib_filefunc64_def f{};
    f.zopen64_file = mem_open;
    f.zread_file = mem_read;
    f.zwrite_file = mem_write;
    f.ztell64_file = mem_tell;
    f.zseek64_file = mem_seek;
    f.zclose_file = mem_close;
    f.zerror_file = mem_error;
    f.opaque = &stream_;
    handle_ = unzOpen2_64("memory", &f);
  }
  ~Unzip() {
    if (handle_ != nullptr) unzClose(handle_);
  }
  Unzip(const Unzip&) = delete;
  Unzip& operator=(const Unzip&) = delete;
  unzFile get() const { return handle_; }

 private:
  MemoryStream stream_;
  unzFile handle_ = nullptr;
};

std::string zip_error_name(int code) {
  switch (code) {
    case UNZ_ERRNO:
      return "I/O error";
    case UNZ_EOF:
      return "unexpected end of data";
    case UNZ_PARAMERROR:
      return "bad parameter";
    case UNZ_BADZIPFILE:
      return "damaged zip structure";
    case UNZ_INTERNALERROR:
      return "internal error";
    case UNZ_CRCERROR:
      return "CRC-32 mismatch";
    default:
      return "error " + std::to_string(code);
  }
}

// Deflate cannot expand by more than about 1032:1; a larger claim is a damaged header,
// refused before anything is allocated.
constexpr uint64_t kMaxDeflateRatio = 1032;

}  // namespace

bool looks_like_zip(std::span<const uint8_t> bytes) {
  static constexpr uint8_t kLocal[4] = {'P', 'K', 3, 4};
  static constexpr uint8_t kEmpty[4] = {'P', 'K', 5, 6};
  return bytes.size() >= 4 &&
         (std::memcmp(bytes.data(), kLocal, 4) == 0 || std::memcmp(bytes.data(), kEmpty, 4) == 0);
}

Location ZipArchive::at(const std::string& entry, std::optional<uint64_t> offset) const {
  Location loc;
  loc.file = entry.empty() ? file_ : file_ + "!" + entry;
  loc.byte_offset = offset;
  return loc;
}

Result<ZipArchive> ZipArchive::open(std::shared_ptr<const Blob> blob, std::string file) {
  ZipArchive a;
  a.blob_ = std::move(blob);
  a.file_ = std::move(file);
  std::span<const uint8_t> bytes = a.blob_->bytes();
  // The archive must end with a complete end-of-central-directory record (22 bytes and its
  // comment). minizip alone accepts a file cut inside it when zip64 records precede it.
  bool has_end = false;
  for (size_t k = 22; k <= bytes.size() && k <= 22 + 65535 && !has_end; ++k) {
    const uint8_t* p = bytes.data() + bytes.size() - k;
    if (p[0] == 'P' && p[1] == 'K' && p[2] == 5 && p[3] == 6) {
      size_t comment = p[20] | (static_cast<size_t>(p[21]) << 8);
      has_end = 22 + comment == k;
    }
  }
  if (!has_end) {
    return invalid_input(
        "not a complete zip archive: it does not end with an end-of-central-"
        "directory record (truncated or damaged)",
        a.at(""));
  }
  Unzip zip(bytes);
  if (zip.get() == nullptr) {
    return invalid_input(
        "not a readable zip archive: no valid end-of-central-directory record "
        "(the file is truncated, damaged or not a zip file)",
        a.at(""));
  }
  unz_global_info64 info{};
  if (int rc = unzGetGlobalInfo64(zip.get(), &info); rc != UNZ_OK) {
    return invalid_input("zip central directory: " + zip_error_name(rc), a.at(""));
  }
  if (info.number_entry > bytes.size() / 46) {  // a central directory record is >= 46 bytes
    return invalid_input("zip central directory claims " + std::to_string(info.number_entry) +
                             " entries, more than a file of " + std::to_string(bytes.size()) +
                             " bytes can hold",
                         a.at(""));
  }
  int rc = unzGoToFirstFile(zip.get());
  for (uint64_t k = 0; k < info.number_entry; ++k) {
    if (rc != UNZ_OK) {
      return invalid_input(
          "zip central directory entry " + std::to_string(k) + ": " + zip_error_name(rc), a.at(""));
    }
    unz_file_info64 fi{};
    char name_buf[1024];
    rc = unzGetCurrentFileInfo64(zip.get(), &fi, name_buf, sizeof name_buf, nullptr, 0, nullptr, 0);
    if (rc != UNZ_OK) {
      return invalid_input(
          "zip central directory entry " + std::to_string(k) + ": " + zip_error_name(rc), a.at(""));
    }
    if (fi.size_filename >= sizeof name_buf) {
      return invalid_input("zip entry " + std::to_string(k) + " has a name of " +
                               std::to_string(fi.size_filename) + " bytes (at most 1023 read)",
                           a.at(""));
    }
    ZipEntry e;
    e.name.assign(name_buf, fi.size_filename);
    e.method = static_cast<uint16_t>(fi.compression_method);
    e.compressed_size = fi.compressed_size;
    e.size = fi.uncompressed_size;
    e.crc = static_cast<uint32_t>(fi.crc);
    if (e.name.find('\0') != std::string::npos) {
      return invalid_input("zip entry " + std::to_string(k) + " has a NUL byte in its name",
                           a.at(""));
    }
    if (fi.flag & 1) return unsupported("the entry is encrypted", a.at(e.name));
    if (e.method != 0 && e.method != Z_DEFLATED) {
      return unsupported("compression method " + std::to_string(e.method) +
                             " (etc reads stored and deflated entries)",
                         a.at(e.name));
    }
    if (e.method == 0 && e.compressed_size != e.size) {
      return invalid_input("a stored entry's sizes differ (" + std::to_string(e.compressed_size) +
                               " stored, " + std::to_string(e.size) + " uncompressed)",
                           a.at(e.name));
    }
    if (e.compressed_size > bytes.size()) {
      return invalid_input("the entry claims " + std::to_string(e.compressed_size) +
                               " bytes; the archive has " + std::to_string(bytes.size()),
                           a.at(e.name));
    }
    if (e.method == Z_DEFLATED && e.size / kMaxDeflateRatio > e.compressed_size + 1024) {
      return invalid_input("the entry claims " + std::to_string(e.size) + " bytes inflated from " +
                               std::to_string(e.compressed_size) + ", more than deflate can expand",
                           a.at(e.name));
    }
    // Opening the entry checks its local header against the central directory and gives
    // the offset of its data.
    if (int orc = unzOpenCurrentFile(zip.get()); orc != UNZ_OK) {
      return invalid_input("the entry's local header: " + zip_error_name(orc), a.at(e.name));
    }
    e.data_offset = unzGetCurrentFileZStreamPos64(zip.get());
    unzCloseCurrentFile(zip.get());
    if (e.data_offset > bytes.size() || e.compressed_size > bytes.size() - e.data_offset) {
      return invalid_input("the entry's " + std::to_string(e.compressed_size) +
                               " bytes at offset " + std::to_string(e.data_offset) +
                               " run past the end of the archive (" + std::to_string(bytes.size()) +
                               " bytes)",
                           a.at(e.name, e.data_offset));
    }
    if (!a.index_.emplace(e.name, a.entries_.size()).second) {
      return invalid_input("the archive holds two entries named '" + e.name + "'", a.at(""));
    }
    a.entries_.push_back(std::move(e));
    rc = k + 1 < info.number_entry ? unzGoToNextFile(zip.get()) : UNZ_OK;
  }
  return a;
}

const ZipEntry* ZipArchive::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

namespace {

uint32_t crc32_of(std::span<const uint8_t> data) {
  return static_cast<uint32_t>(crc32_z(crc32_z(0L, Z_NULL, 0), data.data(), data.size()));
}

// CRC-32 of a large entry (a model's embedding table is tens of MB), split across the cores
// and joined with crc32_combine: checking every weight costs a fraction of the export.
uint32_t crc32_parallel(std::span<const uint8_t> data) {
  constexpr size_t kMinPart = size_t{8} << 20;
  const size_t cores = std::max(1u, std::thread::hardware_concurrency());
  const size_t parts = std::min(cores, data.size() / kMinPart);
  if (parts <= 1) return crc32_of(data);
  const size_t part = (data.size() + parts - 1) / parts;
  std::vector<uint32_t> crcs(parts);
  std::vector<std::thread> workers;
  auto piece = [&](size_t i) {
    return data.subspan(i * part, std::min(part, data.size() - i * part));
  };
  try {
    for (size_t i = 1; i < parts; ++i)
      workers.emplace_back([&crcs, &piece, i] { crcs[i] = crc32_of(piece(i)); });
  } catch (const std::system_error&) {  // no threads to be had: the rest on this one
    for (size_t i = workers.size() + 1; i < parts; ++i)
      crcs[i] = crc32_of(piece(i));
  }
  crcs[0] = crc32_of(piece(0));
  for (std::thread& t : workers)
    t.join();
  uLong crc = crcs[0];
  for (size_t i = 1; i < parts; ++i)
    crc = crc32_combine(crc, crcs[i], static_cast<z_off_t>(piece(i).size()));
  return static_cast<uint32_t>(crc);
}

}  // namespace

Result<ConstantData> ZipArchive::read(const ZipEntry& e) const {
  std::span<const uint8_t> bytes = blob_->bytes();
  if (e.method == 0) {
    std::span<const uint8_t> data = bytes.subspan(e.data_offset, e.size);
    const uint32_t crc = crc32_parallel(data);
    // Checked: the pages read leave the process (they are read again from the file where the
    // export needs the bytes), so checking a model's weights does not hold them all at once.
    blob_->release(e.data_offset, e.size);
    if (crc != e.crc) {
      return invalid_input("CRC-32 mismatch: the entry's bytes are damaged",
                           at(e.name, e.data_offset));
    }
    return ConstantData{blob_, e.data_offset, e.size};
  }
  // Deflated: inflate into a buffer of the declared size (bounded at open()).
  if (e.size > std::numeric_limits<size_t>::max() / 2) {
    return invalid_input("the entry is too large to inflate", at(e.name));
  }
  std::string out(e.size, '\0');
  z_stream z{};
  if (inflateInit2(&z, -MAX_WBITS) != Z_OK)
    return internal_error("inflateInit2 failed", at(e.name));
  z.next_in = const_cast<Bytef*>(bytes.data() + e.data_offset);
  uint64_t in_left = e.compressed_size;
  uint64_t out_done = 0;
  int rc = Z_OK;
  while (rc == Z_OK) {
    uInt in_chunk = static_cast<uInt>(std::min<uint64_t>(in_left, 1u << 30));
    uInt out_chunk = static_cast<uInt>(std::min<uint64_t>(e.size - out_done, 1u << 30));
    z.avail_in = in_chunk;
    z.next_out = reinterpret_cast<Bytef*>(out.data() + out_done);
    z.avail_out = out_chunk;
    rc = inflate(&z, Z_NO_FLUSH);
    in_left -= in_chunk - z.avail_in;
    out_done += out_chunk - z.avail_out;
    if (rc == Z_OK && z.avail_in == in_chunk && z.avail_out == out_chunk) rc = Z_BUF_ERROR;
  }
  inflateEnd(&z);
  if (rc != Z_STREAM_END || out_done != e.size) {
    return invalid_input("the entry does not inflate to its declared " + std::to_string(e.size) +
                             " bytes (damaged deflate data)",
                         at(e.name, e.data_offset));
  }
  uLong crc =
      crc32_z(crc32_z(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(out.data()), out.size());
  if (static_cast<uint32_t>(crc) != e.crc) {
    return invalid_input("CRC-32 mismatch: the entry's bytes are damaged",
                         at(e.name, e.data_offset));
  }
  auto blob = make_blob(std::move(out));
  size_t n = blob->bytes().size();
  return ConstantData{std::move(blob), 0, n};
}

Result<std::string> ZipArchive::read_text(const ZipEntry& e) const {
  ETC_ASSIGN_OR_RETURN(ConstantData d, read(e));
  std::span<const uint8_t> b = d.bytes();
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

}  // namespace etc::torch_import
