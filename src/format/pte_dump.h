// Canonical dumps of a .pte for people and for golden-file CI: text, JSON (stable keys,
// sorted; byte-identical for identical programs) and Graphviz DOT (instructions as nodes,
// delegates filled by device, device copies highlighted).
#pragma once

#include <string>

#include "format/pte_model.h"

namespace etc {

std::string dump_text(const pte::File& file);
std::string dump_json(const pte::File& file);
std::string dump_dot(const pte::File& file);

}  // namespace etc
