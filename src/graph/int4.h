// The layout of etc::unpack_int4's packed weights (ops.def), for the pass that packs them
// and the kernels that read them: a row of `size` signed 4-bit values (-8..7) in
// ceil(size / 2) bytes, value c in the low nibble of byte c / 2 when c is even, in the high
// nibble when odd (an odd row's last high nibble is 0). The readers are constexpr, so that
// the CUDA kernels (compiled with --expt-relaxed-constexpr) call them too.
#pragma once

#include <cstdint>

namespace etc::int4 {

constexpr int64_t row_bytes(int64_t size) {
  return size / 2 + size % 2;  // (size + 1) / 2 without overflow
}

// Whether v is a value a nibble holds.
constexpr bool fits(int8_t v) {
  return v >= -8 && v <= 7;
}

// The low 4 bits of `nibble` sign-extended.
constexpr int8_t widen(unsigned nibble) {
  return static_cast<int8_t>(static_cast<int>((nibble & 0x0Fu) ^ 0x08u) - 8);
}

// Value c of a packed row.
constexpr int8_t at(const uint8_t* row, int64_t c) {
  const unsigned b = row[c >> 1];
  return widen((c & 1) != 0 ? b >> 4 : b);
}

// Values [from, from + count) of a packed row into out[0, count).
inline void unpack(const uint8_t* row, int64_t from, int64_t count, int8_t* out) {
  int64_t i = 0;
  if ((from & 1) != 0 && count > 0) {
    out[0] = at(row, from);
    i = 1;
  }
  const uint8_t* b = row + ((from + i) >> 1);
  for (; i + 2 <= count; i += 2, ++b) {
    out[i] = widen(*b);
    out[i + 1] = widen(static_cast<unsigned>(*b) >> 4);
  }
  if (i < count) out[i] = at(row, from + i);
}

// A row of `size` values, each fits(), into row_bytes(size) bytes.
inline void pack(const int8_t* values, int64_t size, uint8_t* row) {
  for (int64_t c = 0; c + 1 < size; c += 2) {
    row[c >> 1] = static_cast<uint8_t>((static_cast<unsigned>(values[c]) & 0x0Fu) |
                                       ((static_cast<unsigned>(values[c + 1]) & 0x0Fu) << 4));
  }
  if ((size & 1) != 0) row[size >> 1] = static_cast<uint8_t>(values[size - 1] & 0x0F);
}

}  // namespace etc::int4
