#include "frontends/json/safetensors.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "support/checked_math.h"

namespace etc {
namespace {

// The reference implementation refuses headers over 100 MB; so do we.
constexpr uint64_t kMaxHeader = 100'000'000;

Status bad(const std::string& path, uint64_t offset, std::string message) {
  return invalid_input("safetensors: " + std::move(message),
                       Location{.file = path, .byte_offset = offset});
}

}  // namespace

Result<SafetensorsFile> read_safetensors(const std::string& path) {
  ETC_ASSIGN_OR_RETURN(std::shared_ptr<const Blob> blob, map_file(path));
  return parse_safetensors(std::move(blob), path);
}

Result<SafetensorsFile> parse_safetensors(std::shared_ptr<const Blob> blob,
                                          const std::string& path) {
  std::span<const uint8_t> bytes = blob->bytes();
  if (bytes.size() < 8) {
    return bad(path, 0,
               "file is " + std::to_string(bytes.size()) +
                   " bytes, too short for the 8-byte header length");
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | bytes[i];
  if (n > kMaxHeader)
    return bad(path, 0, "header length " + std::to_string(n) + " is larger than 100 MB");
  if (n > bytes.size() - 8) {
    return bad(path, 0,
               "header length " + std::to_string(n) + " runs past the end of the file (" +
                   std::to_string(bytes.size()) + " bytes)");
  }
  const uint64_t data_start = 8 + n;
  const uint64_t data_size = bytes.size() - data_start;
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes.begin() + 8,
                                   bytes.begin() + static_cast<ptrdiff_t>(data_start));
  } catch (const nlohmann::json::exception& e) {
    return bad(path, 8, std::string("header is not valid JSON: ") + e.what());
  }
  if (!header.is_object()) return bad(path, 8, "header is not a JSON object");

  SafetensorsFile file;
  file.path = path;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const auto& item : header.items()) {
    const std::string name = item.key();
    const nlohmann::json& entry = item.value();
    if (name == "__metadata__") continue;
    auto fail = [&](std::string msg) { return bad(path, 8, "tensor '" + name + "': " + msg); };
    if (!entry.is_object()) return fail("entry is not an object");
    SafetensorsTensor t;
    auto dt = entry.find("dtype");
    if (dt == entry.end() || !dt->is_string()) return fail("missing \"dtype\"");
    auto dtype = dtype_from_safetensors(dt->get<std::string>());
    if (!dtype) return fail("unsupported dtype \"" + dt->get<std::string>() + "\"");
    t.dtype = *dtype;
    auto sh = entry.find("shape");
    if (sh == entry.end() || !sh->is_array()) return fail("missing \"shape\"");
    for (const auto& d : *sh) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > (uint64_t{1} << 62)) {
        return fail("shape entries must be non-negative integers");
      }
      t.shape.push_back(d.get<int64_t>());
    }
    auto off = entry.find("data_offsets");
    if (off == entry.end() || !off->is_array() || off->size() != 2 ||
        !(*off)[0].is_number_unsigned() || !(*off)[1].is_number_unsigned()) {
      return fail("\"data_offsets\" must be two non-negative integers");
    }
    uint64_t begin = (*off)[0].get<uint64_t>(), end = (*off)[1].get<uint64_t>();
    if (begin > end || end > data_size) {
      return fail("data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                  "] lie outside the data section of " + std::to_string(data_size) + " bytes");
    }
    auto numel = checked_numel(t.shape);
    auto nbytes = numel ? checked_mul(*numel, dtype_size(t.dtype)) : std::nullopt;
    if (!nbytes || static_cast<uint64_t>(*nbytes) != end - begin) {
      return fail("shape " + shape_to_string(t.shape) + " of " + std::string(dtype_name(t.dtype)) +
                  " needs " + (nbytes ? std::to_string(*nbytes) : std::string("too many")) +
                  " bytes but data_offsets span " + std::to_string(end - begin));
    }
    t.data = ConstantData{blob, static_cast<size_t>(data_start + begin),
                          static_cast<size_t>(end - begin)};
    ranges.emplace_back(begin, end);
    file.tensors.emplace(name, std::move(t));
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].first < ranges[i - 1].second) {
      return bad(path, data_start + ranges[i].first, "tensor data ranges overlap");
    }
  }
  return file;
}

std::string write_safetensors(const std::vector<SafetensorsEntryIn>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  std::string data;
  std::vector<const SafetensorsEntryIn*> sorted;
  sorted.reserve(tensors.size());
  for (const auto& t : tensors)
    sorted.push_back(&t);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->name < b->name; });
  for (const SafetensorsEntryIn* t : sorted) {
    header[t->name] = {{"dtype", std::string(dtype_safetensors_name(t->dtype))},
                       {"shape", t->shape},
                       {"data_offsets", {data.size(), data.size() + t->bytes.size()}}};
    data += t->bytes;
  }
  std::string h = header.dump();
  while ((8 + h.size()) % 8 != 0)
    h += ' ';
  std::string out(8, '\0');
  uint64_t n = h.size();
  for (int i = 0; i < 8; ++i)
    out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + h + data;
}

}  // namespace etc
