#include "passes/report.h"

#include <nlohmann/json.hpp>

namespace etc {

size_t ExportReport::count_copies(const std::string& kind) const {
  size_t n = 0;
  for (const Copy& c : copies)
    n += c.kind == kind;
  return n;
}

int64_t ExportReport::copy_bytes() const {
  int64_t n = 0;
  for (const Copy& c : copies)
    n += c.bytes;
  return n;
}

std::string ExportReport::to_json() const {
  using nlohmann::ordered_json;
  ordered_json j;
  ordered_json host = ordered_json::array();
  for (const HostOp& h : host_ops)
    host.push_back({{"node", h.node}, {"op", h.op}, {"reason", h.reason}});
  j["ops"] = {{"total", total_ops}, {"delegated", delegated_ops}, {"host", host}};
  ordered_json parts = ordered_json::array();
  for (const Partition& p : partitions) {
    parts.push_back({{"delegate", p.delegate},
                     {"device", to_string(p.device)},
                     {"nodes", p.nodes},
                     {"inputs", p.inputs},
                     {"outputs", p.outputs}});
  }
  j["partitions"] = parts;
  ordered_json boundary_list = ordered_json::array();
  for (const BoundaryTensor& b : boundary) {
    boundary_list.push_back(
        {{"value", b.value}, {"device", to_string(b.device)}, {"reason", b.reason}});
  }
  j["boundary"] = boundary_list;
  ordered_json copy_list = ordered_json::array();
  for (const Copy& c : copies) {
    copy_list.push_back({{"kind", c.kind},
                         {"source", c.source},
                         {"copy", c.copy},
                         {"from", to_string(c.from)},
                         {"to", to_string(c.to)},
                         {"bytes", c.bytes},
                         {"cause", c.cause}});
  }
  j["copies"] = {{"h2d", count_copies("h2d")},
                 {"d2h", count_copies("d2h")},
                 {"bytes", copy_bytes()},
                 {"list", copy_list}};
  ordered_json mem = ordered_json::array();
  for (const Buffer& b : memory) {
    mem.push_back({{"mem_id", b.mem_id},
                   {"device", to_string(b.device)},
                   {"tensors", b.tensors},
                   {"planned_bytes", b.planned_bytes},
                   {"lower_bound_bytes", b.lower_bound_bytes},
                   {"baseline_bytes", b.baseline_bytes},
                   {"algorithm", b.algorithm}});
  }
  j["memory"] = mem;
  return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

std::string ExportReport::summary() const {
  std::string s = "ops: " + std::to_string(delegated_ops) + " of " + std::to_string(total_ops) +
                  " delegated in " + std::to_string(partitions.size()) + " partition" +
                  (partitions.size() == 1 ? "" : "s") + "\n";
  s += "copies per inference: " + std::to_string(count_copies("h2d")) + " h2d, " +
       std::to_string(count_copies("d2h")) + " d2h, " + std::to_string(copy_bytes()) + " bytes\n";
  for (const Buffer& b : memory) {
    s += "buffer " + std::to_string(b.mem_id) + " (" + to_string(b.device) +
         "): " + std::to_string(b.planned_bytes) + " bytes planned, lower bound " +
         std::to_string(b.lower_bound_bytes) + "\n";
  }
  return s;
}

}  // namespace etc
