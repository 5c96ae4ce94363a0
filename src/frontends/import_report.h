// What the importers (ONNX, torch.export) say when a model uses operators etc cannot import:
// every op at once, with its count, the first node names, and where the node came from when
// the format records it.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "support/status.h"

namespace etc {

struct UnsupportedOp {
  std::vector<std::string> nodes;  // node names, in model order
  std::string source;              // e.g. the Python line of the first node; may be empty
  std::string reason;              // why etc refuses the op, where it is a known limit
};

// "3 nodes of 2 op types that etc cannot import (see `etc ops --onnx`):\n  Op x2: a, b\n ..."
// `what` names the kind ("op type", "op"), `ops_flag` the `etc ops` flag that lists what is
// supported.
std::string unsupported_ops_message(const std::map<std::string, UnsupportedOp>& missing,
                                    const std::string& what, const std::string& ops_flag);

// The error for `missing`: kUnsupported, the message above, located at `where`, and the
// ops as its subjects (the Python package's UnsupportedOperatorError.ops).
Status unsupported_ops(const std::map<std::string, UnsupportedOp>& missing, const std::string& what,
                       const std::string& ops_flag, Location where);

}  // namespace etc
