#include "format/pte_diff.h"

#include <nlohmann/json.hpp>

#include "format/pte_dump.h"

namespace etc {
namespace {

using nlohmann::json;

// The semantic part of a program's canonical JSON dump.
json semantic(const pte::File& f) {
  json full = json::parse(dump_json(f));
  json out;
  out["version"] = full["version"];
  json plans = full["plans"];
  for (json& p : plans) {
    for (json& d : p["delegates"]) {
      d.erase("index");  // which segment holds the blob is layout
      d.erase("size");   // the blob's size follows from its content
    }
  }
  out["plans"] = plans;
  // Named data by key with content fingerprints instead of segment indices.
  json named = json::object();
  for (const pte::NamedData& n : f.program.named_data) {
    auto bytes = f.named_bytes(n.key);
    named[n.key] = bytes ? bytes->size() : 0;
  }
  out["named_data_sizes"] = named;
  return out;
}

// "path.key" (or "key" at the top).
std::string member_path(const std::string& path, const std::string& key) {
  if (path.empty()) return key;
  std::string p = path;
  p += '.';
  p += key;
  return p;
}

void walk(const json& a, const json& b, const std::string& path, std::vector<PteDifference>& out) {
  if (a.type() == json::value_t::object && b.type() == json::value_t::object) {
    for (const auto& [k, v] : a.items()) {
      std::string p = member_path(path, k);
      if (!b.contains(k)) {
        out.push_back({p, v.dump(), "(absent)"});
      } else {
        walk(v, b[k], p, out);
      }
    }
    for (const auto& [k, v] : b.items()) {
      if (!a.contains(k)) out.push_back({member_path(path, k), "(absent)", v.dump()});
    }
    return;
  }
  if (a.is_array() && b.is_array()) {
    size_t n = std::max(a.size(), b.size());
    for (size_t i = 0; i < n; ++i) {
      std::string p = path + "[" + std::to_string(i) + "]";
      if (i >= a.size()) {
        out.push_back({p, "(absent)", b[i].dump()});
      } else if (i >= b.size()) {
        out.push_back({p, a[i].dump(), "(absent)"});
      } else {
        walk(a[i], b[i], p, out);
      }
    }
    return;
  }
  if (a != b) out.push_back({path, a.dump(), b.dump()});
}

}  // namespace

std::vector<PteDifference> diff_programs(const pte::File& a, const pte::File& b) {
  std::vector<PteDifference> out;
  walk(semantic(a), semantic(b), "", out);
  return out;
}

std::string format_differences(const std::vector<PteDifference>& diffs, size_t limit) {
  if (diffs.empty()) return "equivalent\n";
  std::string s =
      std::to_string(diffs.size()) + " difference" + (diffs.size() == 1 ? "" : "s") + ":\n";
  for (size_t i = 0; i < diffs.size() && i < limit; ++i) {
    s += "  " + diffs[i].path + ": " + diffs[i].a + " -> " + diffs[i].b + "\n";
  }
  if (diffs.size() > limit) s += "  ... and " + std::to_string(diffs.size() - limit) + " more\n";
  return s;
}

std::string differences_json(const std::vector<PteDifference>& diffs) {
  json j;
  j["equivalent"] = diffs.empty();
  j["differences"] = json::array();
  for (const PteDifference& d : diffs)
    j["differences"].push_back({{"path", d.path}, {"a", d.a}, {"b", d.b}});
  return j.dump(2) + "\n";
}

}  // namespace etc
