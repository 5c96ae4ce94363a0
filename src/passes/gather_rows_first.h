// gather-rows-first: an embedding whose table the program computes row by row from
// constants (a quantized embedding: torchao's dequantize_affine of an int8 or int4 table
// with a scale and zero point per row or per group of a row, then aten.embedding) gathers
// the constants' rows first and computes only the rows it looks up. The program dequantized
// the whole table on every call (32000 x 2048 values for a decoder's token embedding, to
// read one row); now it dequantizes the rows it reads, with the same values: gathering rows
// commutes with operations that work row by row. A packed int4 table (pack-int4-weights)
// is gathered packed and unpacked after.
#pragma once

#include "passes/pass.h"

namespace etc {

Result<bool> gather_rows_first(Graph& graph, PassContext& context);

}  // namespace etc
