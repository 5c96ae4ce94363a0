// cse: common subexpression elimination. Two nodes of the same op with the same arguments
// (the same values, small constants by their contents, attributes bit for bit) compute the
// same outputs: the later one's users read the earlier one's outputs instead, and it is
// erased. The IR is SSA and its ops are functions of their arguments, so this changes no
// value the program defines; it removes work that importers and model code repeat
// (torchao's 8da4w programs quantize one activation once per projection that reads it: q, k
// and v each run the same choose_qparams and quantize steps).
//
// Not in the default pipeline (`etc export --passes ...,cse,...` adds it). On a 57M-parameter
// 8da4w decoder it merges 575 of 2126 instructions, but the CPU runtime's load planner gives
// an activation's quantization steps to the int8 x int4 product only where that product is
// their one reader (load_plan_dequant.cpp): merged, the q/k/v and gate/up products run on the
// float path instead. A decode step's instructions took 2.62-2.66 ms against 2.75-2.82 (the
// same within the VM's spread per token), a 64-token prefill 58.5-59.3 ms against 57.0-57.4,
// and the greedy ids part after 22 tokens (the float path's bits). The 20 zoo models hold no
// repeated computation. It belongs in the pipeline once the planner lets several products
// read one activation's int8 rows.
//
// Left alone:
// - ops whose result is not a function of their arguments (rand, randn, randperm), device
//   copies and delegate calls;
// - nodes that read no runtime value (only constants, or no tensor at all): weights'
//   preparation chains belong to the passes that fold, pack or fuse them per use (a tied
//   embedding's dequantization feeds the gather and the output layer differently);
// - a node whose output is a graph output or a state's update, so that those stay the values
//   the program names;
// - programs with dynamic dims (ExportOptions::dynamic_shapes): two size arguments equal at
//   one size may differ at another, and the export requires one program for all of them.
// A graph whose memory is planned already is a usage error: merging lengthens lifetimes.
#pragma once

#include "passes/pass.h"

namespace etc {

Result<bool> eliminate_common_subexpressions(Graph& graph, PassContext& context);

}  // namespace etc
