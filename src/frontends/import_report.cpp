#include "frontends/import_report.h"

namespace etc {

std::string unsupported_ops_message(const std::map<std::string, UnsupportedOp>& missing,
                                    const std::string& what, const std::string& ops_flag) {
  size_t total = 0;
  std::string list;
  for (const auto& [op, u] : missing) {
    total += u.nodes.size();
    list += "\n  " + op + " x" + std::to_string(u.nodes.size()) + ": ";
    for (size_t k = 0; k < u.nodes.size() && k < 5; ++k)
      list += (k ? ", " : "") + u.nodes[k];
    if (u.nodes.size() > 5) list += ", ... (" + std::to_string(u.nodes.size() - 5) + " more)";
    if (!u.reason.empty()) list += "\n      why: " + u.reason;
    if (!u.source.empty()) list += "\n      at " + u.source;
  }
  return std::to_string(total) + " node" + (total == 1 ? "" : "s") + " of " +
         std::to_string(missing.size()) + " " + what + (missing.size() == 1 ? "" : "s") +
         " that etc cannot import (see `etc ops " + ops_flag + "`):" + list;
}

Status unsupported_ops(const std::map<std::string, UnsupportedOp>& missing, const std::string& what,
                       const std::string& ops_flag, Location where) {
  std::vector<std::string> ops;
  ops.reserve(missing.size());
  for (const auto& entry : missing)
    ops.push_back(entry.first);
  return unsupported(unsupported_ops_message(missing, what, ops_flag), std::move(where))
      .set_subjects(std::move(ops));
}

}  // namespace etc
