#include "runtime/npy.h"

#include <cstring>

#include "graph/tensor_spec.h"
#include "support/checked_math.h"
#include "support/file_io.h"

namespace etc::rt {
namespace {

struct NpyType {
  const char* descr;
  DType dtype;
};
// bfloat16 has no NumPy type.
constexpr NpyType kTypes[] = {
    {"|b1", DType::kBool},    {"|i1", DType::kInt8},    {"|u1", DType::kUInt8},
    {"<i2", DType::kInt16},   {"<i4", DType::kInt32},   {"<i8", DType::kInt64},
    {"<f2", DType::kFloat16}, {"<f4", DType::kFloat32}, {"<f8", DType::kFloat64}};

Status bad(const std::string& path, size_t offset, const std::string& what) {
  return invalid_input("npy: " + what, Location{.file = path, .byte_offset = offset});
}

// Finds `'key': ` in the header dict and returns the text after it.
std::string_view field(std::string_view header, std::string_view key) {
  std::string pattern = "'" + std::string(key) + "':";
  size_t at = header.find(pattern);
  if (at == std::string_view::npos) return {};
  std::string_view rest = header.substr(at + pattern.size());
  while (!rest.empty() && rest.front() == ' ')
    rest.remove_prefix(1);
  return rest;
}

}  // namespace

Result<NpyArray> parse_npy(std::string_view bytes, const std::string& path) {
  if (bytes.size() < 10 || bytes.substr(0, 6) != "\x93NUMPY")
    return bad(path, 0, "not a .npy file (magic \\x93NUMPY missing)");
  uint8_t major = static_cast<uint8_t>(bytes[6]);
  size_t header_len = 0, header_start = 0;
  if (major == 1) {
    header_len =
        static_cast<uint8_t>(bytes[8]) | (static_cast<size_t>(static_cast<uint8_t>(bytes[9])) << 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return bad(path, 8, "truncated header length");
    header_len = 0;
    for (int i = 3; i >= 0; --i)
      header_len = (header_len << 8) | static_cast<uint8_t>(bytes[8 + static_cast<size_t>(i)]);
    header_start = 12;
  } else {
    return bad(path, 6, "unsupported format version " + std::to_string(major));
  }
  if (header_start + header_len > bytes.size())
    return bad(path, 8, "header length runs past the end of the file");
  std::string_view header = bytes.substr(header_start, header_len);
  NpyArray a;
  std::string_view descr = field(header, "descr");
  bool found = false;
  for (const NpyType& t : kTypes) {
    std::string quoted = "'" + std::string(t.descr) + "'";
    if (descr.substr(0, quoted.size()) == quoted) {
      a.dtype = t.dtype;
      found = true;
    }
  }
  if (!found) {
    return bad(path, header_start,
               "unsupported dtype " + std::string(descr.substr(0, descr.find(','))) +
                   " (supported: bool, int8/16/32/64, uint8, float16/32/64, little-endian)");
  }
  if (field(header, "fortran_order").substr(0, 5) != "False") {
    return bad(path, header_start,
               "Fortran-order arrays are not supported (save with np.ascontiguousarray)");
  }
  std::string_view shape = field(header, "shape");
  if (shape.empty() || shape.front() != '(') return bad(path, header_start, "header has no shape");
  size_t close = shape.find(')');
  if (close == std::string_view::npos) return bad(path, header_start, "malformed shape");
  std::string_view dims = shape.substr(1, close - 1);
  size_t pos = 0;
  while (pos < dims.size()) {
    while (pos < dims.size() && (dims[pos] == ' ' || dims[pos] == ','))
      ++pos;
    if (pos >= dims.size()) break;
    int64_t d = 0;
    size_t start = pos;
    while (pos < dims.size() && dims[pos] >= '0' && dims[pos] <= '9') {
      if (d > (int64_t{1} << 48)) return bad(path, header_start, "shape dim too large");
      d = d * 10 + (dims[pos++] - '0');
    }
    if (pos == start) return bad(path, header_start, "malformed shape '" + std::string(dims) + "'");
    a.shape.push_back(d);
  }
  size_t data_start = header_start + header_len;
  auto numel = checked_numel(a.shape);
  auto nbytes = numel ? checked_mul(*numel, dtype_size(a.dtype)) : std::nullopt;
  if (!nbytes) return bad(path, header_start, "shape overflows a 64-bit byte count");
  if (bytes.size() - data_start != static_cast<size_t>(*nbytes)) {
    return bad(path, data_start,
               "data holds " + std::to_string(bytes.size() - data_start) + " bytes, shape " +
                   shape_to_string(a.shape) + " of " + std::string(dtype_name(a.dtype)) +
                   " needs " + std::to_string(*nbytes));
  }
  a.data = std::string(bytes.substr(data_start));
  return a;
}

Result<NpyArray> read_npy(const std::string& path) {
  ETC_ASSIGN_OR_RETURN(std::string bytes, read_text_file(path));
  return parse_npy(bytes, path);
}

std::string serialize_npy(const NpyArray& in) {
  // bfloat16 has no NumPy type: written as float32, which holds every bfloat16 exactly.
  NpyArray widened;
  if (in.dtype == DType::kBFloat16) {
    widened.dtype = DType::kFloat32;
    widened.shape = in.shape;
    const size_t n = in.data.size() / 2;
    widened.data.resize(n * 4);
    for (size_t i = 0; i < n; ++i) {
      const auto v = static_cast<float>(load_as_double(DType::kBFloat16, in.data.data() + 2 * i));
      std::memcpy(widened.data.data() + 4 * i, &v, 4);
    }
  }
  const NpyArray& a = in.dtype == DType::kBFloat16 ? widened : in;
  const char* descr = nullptr;
  for (const NpyType& t : kTypes) {
    if (t.dtype == a.dtype) descr = t.descr;
  }
  if (descr == nullptr) return std::string();  // no NumPy type (write_npy says so)
  // NumPy's own spelling: "(2, 3)", "(5,)", "()".
  std::string pretty = "(";
  for (size_t i = 0; i < a.shape.size(); ++i)
    pretty += (i ? ", " : "") + std::to_string(a.shape[i]);
  pretty += a.shape.size() == 1 ? ",)" : ")";
  std::string header =
      "{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': " + pretty + ", }";
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>((header.size() >> 8) & 0xff);
  return out + header + a.data;
}

Status write_npy(const std::string& path, const NpyArray& array) {
  std::string bytes = serialize_npy(array);
  if (bytes.empty()) {
    return internal_error(path + ": no .npy type for " + std::string(dtype_name(array.dtype)));
  }
  return write_file_atomic(path, {reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()});
}

}  // namespace etc::rt
