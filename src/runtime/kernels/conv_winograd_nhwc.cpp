// Winograd's F(2x2, 3x3) on channels-last tensors (see conv.h and conv_winograd.cpp, whose
// transforms and sums these are, value for value).
//
// A block of tile rows at a time, each block one thread's: the input transform writes
// V[xi][tile][ci] (a tile's 16 transformed values, each a vector of channels from the 4x4
// window's 16 pixels: no gathering across the plane), the 16 products M[xi] = V[xi] U[xi]
// have the tiles as rows and the output channels as columns (U's panels of 32 columns,
// transformed and packed once), and the output transform writes each tile's 2x2 pixels, a
// vector of output channels at a time, then the epilogue runs on the block's rows while they
// are in cache.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "runtime/kernels/conv.h"
#include "runtime/kernels/gemm.h"
#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/parallel.h"
#include "runtime/kernels/simd_vec.h"

namespace etc::rt::kernels {
namespace {

constexpr int64_t kPanel = 32;             // U's panel width: the products' column block
constexpr int64_t kKBlock = kGemmKBlock;   // the GEMM's sums, for the NCHW kernel's bits
constexpr int64_t kBlockFloats = 1 << 18;  // a block's V and M, about 1 MiB: the L2

struct Job {
  const float* x;
  const WinogradNhwcWeights* w;
  const float* bias;  // npad values (zero past C_out, or all zero)
  const ConvGeometry* g;
  float* y;
  const float* zero;  // C_in zeros: the window's pixels in the padding
  int64_t th, tw;
};

// A block: tile rows [ty0, ty1) of image n, its V and M in scratch.
struct Block {
  int64_t n, ty0, ty1;
  float* v;  // V[xi] at v + xi * tiles() * c_in, a row per tile
  float* m;  // M[xi] at m + xi * tiles() * npad
  int64_t tiles(int64_t tw) const { return (ty1 - ty0) * tw; }
};

// Tile rows [r0, r1) of the block into its V.
template <typename V>
__attribute__((always_inline)) inline void input_transform(const Job& j, const Block& blk,
                                                           int64_t r0, int64_t r1) {
  constexpr int64_t kL = sizeof(V) / sizeof(float);
  const ConvGeometry& g = *j.g;
  const int64_t n = blk.n, ty0 = blk.ty0;
  float* v = blk.v;
  const int64_t c_in = g.c_in, tiles = blk.tiles(j.tw), xi_stride = tiles * c_in;
  const float* xn = j.x + n * g.h * g.w * c_in;
  for (int64_t ty = r0; ty < r1; ++ty) {
    const int64_t ih0 = ty * 2 - g.pad[0];
    for (int64_t tx = 0; tx < j.tw; ++tx) {
      const int64_t iw0 = tx * 2 - g.pad[1];
      const float* px[4][4];
      for (int r = 0; r < 4; ++r) {
        const int64_t ih = ih0 + r;
        for (int c = 0; c < 4; ++c) {
          const int64_t iw = iw0 + c;
          px[r][c] =
              ih >= 0 && ih < g.h && iw >= 0 && iw < g.w ? xn + (ih * g.w + iw) * c_in : j.zero;
        }
      }
      float* base = v + ((ty - ty0) * j.tw + tx) * c_in;
      for (int64_t ci = 0; ci < c_in; ci += kL) {
        V t[4][4];  // B^T d, in the NCHW kernel's order of operations
#pragma GCC unroll 4
        for (int c = 0; c < 4; ++c) {
          const V d0 = load_v<V>(px[0][c] + ci), d1 = load_v<V>(px[1][c] + ci);
          const V d2 = load_v<V>(px[2][c] + ci), d3 = load_v<V>(px[3][c] + ci);
          t[0][c] = d0 - d2;
          t[1][c] = d1 + d2;
          t[2][c] = d2 - d1;
          t[3][c] = d1 - d3;
        }
#pragma GCC unroll 4
        for (int r = 0; r < 4; ++r) {  // (B^T d) B
          float* dst = base + ci + int64_t{4} * r * xi_stride;
          store_v(dst, t[r][0] - t[r][2]);
          store_v(dst + xi_stride, t[r][1] + t[r][2]);
          store_v(dst + 2 * xi_stride, t[r][2] - t[r][1]);
          store_v(dst + 3 * xi_stride, t[r][1] - t[r][3]);
        }
      }
    }
  }
}

// P rows of a (c_in apart) by the panel (c_in rows of kPanel) into m (ldm apart): per
// output, the multiply-adds over each K block from zero in order, then added to zero (the
// first block) or to the out: the GEMM's sums.
template <typename V, int P>
__attribute__((always_inline)) inline void product_tile(const float* a, int64_t c_in,
                                                        const float* panel, float* m, int64_t ldm) {
  constexpr int64_t kL = sizeof(V) / sizeof(float);
  constexpr int kNV = kPanel / kL;
  for (int64_t k0 = 0; k0 < c_in; k0 += kKBlock) {
    const int64_t k1 = std::min(c_in, k0 + kKBlock);
    V acc[P][kNV];
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) {
#pragma GCC unroll 4
      for (int q = 0; q < kNV; ++q)
        acc[p][q] = V{};
    }
    multiply_add_rows<V, kNV, P>(a, c_in, panel, kPanel, k0, k1, acc);
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) {
#pragma GCC unroll 4
      for (int q = 0; q < kNV; ++q) {
        float* dst = m + p * ldm + q * kL;
        store_v(dst, (k0 == 0 ? V{} : load_v<V>(dst)) + acc[p][q]);
      }
    }
  }
}

// M[xi] = V[xi] U[xi] for the block's tiles (its rows), units [u0, u1) of (xi, panel).
template <typename V>
__attribute__((always_inline)) inline void products(const Job& j, const Block& blk, int64_t u0,
                                                    int64_t u1) {
  constexpr int kRows = sizeof(V) == 64 ? 8 : 3;  // 16 (AVX2: 12) accumulators
  const WinogradNhwcWeights& w = *j.w;
  const int64_t c_in = w.c_in, npad = w.npad, tiles = blk.tiles(j.tw);
  const int64_t panels = npad / kPanel;
  for (int64_t unit = u0; unit < u1; ++unit) {
    const int64_t xi = unit / panels, j0 = unit % panels * kPanel;
    const float* vx = blk.v + xi * tiles * c_in;
    float* mx = blk.m + xi * tiles * npad;
    const float* panel = w.u.data() + (xi * npad + j0) * c_in;
    int64_t r = 0;
    for (; r + kRows <= tiles; r += kRows)
      product_tile<V, kRows>(vx + r * c_in, c_in, panel, mx + r * npad + j0, npad);
    // The rows left in one tile, not one by one (a 14x14 plane's block of 28 tiles left 4:
    // each a pass over the panel).
    const float* a = vx + r * c_in;
    float* out = mx + r * npad + j0;
    switch (tiles - r) {
      case 0:
        break;
      case 1:
        product_tile<V, 1>(a, c_in, panel, out, npad);
        break;
      case 2:
        product_tile<V, 2>(a, c_in, panel, out, npad);
        break;
      case 3:
        product_tile<V, 3>(a, c_in, panel, out, npad);
        break;
      case 4:
        product_tile<V, 4>(a, c_in, panel, out, npad);
        break;
      case 5:
        product_tile<V, 5>(a, c_in, panel, out, npad);
        break;
      case 6:
        product_tile<V, 6>(a, c_in, panel, out, npad);
        break;
      default:
        product_tile<V, 7>(a, c_in, panel, out, npad);
        break;
    }
  }
}

// y = bias + A^T M A for the block's tile rows [r0, r1), a vector of output channels at a
// time.
template <typename V>
__attribute__((always_inline)) inline void output_transform(const Job& j, const Block& blk,
                                                            int64_t r0, int64_t r1) {
  constexpr int64_t kL = sizeof(V) / sizeof(float);
  const ConvGeometry& g = *j.g;
  const int64_t ty0 = blk.ty0;
  const float* m = blk.m;
  const int64_t c_out = g.c_out, npad = j.w->npad, tiles = blk.tiles(j.tw);
  const int64_t xi_stride = tiles * npad;
  float* yn = j.y + blk.n * g.oh * g.ow * c_out;
  for (int64_t ty = r0; ty < r1; ++ty) {
    const int64_t oh = ty * 2, rows = std::min<int64_t>(2, g.oh - oh);
    for (int64_t tx = 0; tx < j.tw; ++tx) {
      const int64_t ow = tx * 2, cols = std::min<int64_t>(2, g.ow - ow);
      const float* mt = m + ((ty - ty0) * j.tw + tx) * npad;
      float* y0 = yn + (oh * g.ow + ow) * c_out;
      for (int64_t co = 0; co < c_out; co += kL) {
        V s[16];
#pragma GCC unroll 16
        for (int xi = 0; xi < 16; ++xi)
          s[xi] = load_v<V>(mt + xi * xi_stride + co);
        const V b = load_v<V>(j.bias + co);
        const int64_t lanes = std::min(kL, c_out - co);  // the last vector may be partial
        for (int64_t r = 0; r < rows; ++r) {
          V t[4];  // row r of A^T s
#pragma GCC unroll 4
          for (int c = 0; c < 4; ++c)
            t[c] = r == 0 ? s[c] + s[4 + c] + s[8 + c] : s[4 + c] - s[8 + c] - s[12 + c];
          float* yr = y0 + r * g.ow * c_out + co;
          const V y_left = b + (t[0] + t[1] + t[2]), y_right = b + (t[1] - t[2] - t[3]);
          if (lanes == kL) {
            store_v(yr, y_left);
            if (cols == 2) store_v(yr + c_out, y_right);
          } else {
            std::memcpy(yr, &y_left, static_cast<size_t>(lanes) * sizeof(float));
            if (cols == 2) {
              std::memcpy(yr + c_out, &y_right, static_cast<size_t>(lanes) * sizeof(float));
            }
          }
        }
      }
    }
  }
}

// One phase of a block over [a0, a1): 0, the input transform of those tile rows; 1, the
// products of those (xi, panel) units; 2, the output transform of those tile rows.
template <typename V>
__attribute__((always_inline)) inline void run_phase(const Job& j, const Block& blk, int phase,
                                                     int64_t a0, int64_t a1) {
  if (phase == 0) {
    input_transform<V>(j, blk, a0, a1);
  } else if (phase == 1) {
    products<V>(j, blk, a0, a1);
  } else {
    output_transform<V>(j, blk, a0, a1);
  }
}

using PhaseFn = void (*)(const Job&, const Block&, int, int64_t, int64_t);
__attribute__((target("avx512f,fma"))) void phase_avx512(const Job& j, const Block& blk, int phase,
                                                         int64_t a0, int64_t a1) {
  run_phase<Vec16>(j, blk, phase, a0, a1);
}
__attribute__((target("avx2,fma"))) void phase_avx2(const Job& j, const Block& blk, int phase,
                                                    int64_t a0, int64_t a1) {
  run_phase<Vec8>(j, blk, phase, a0, a1);
}
void phase_portable(const Job& j, const Block& blk, int phase, int64_t a0, int64_t a1) {
  run_phase<Vec8>(j, blk, phase, a0, a1);
}

}  // namespace

bool winograd_nhwc_shape(const ConvGeometry& g) {
  return g.groups == 1 && g.kh == 3 && g.kw == 3 && g.stride[0] == 1 && g.stride[1] == 1 &&
         g.dil[0] == 1 && g.dil[1] == 1 && g.c_in % 16 == 0 && g.c_in > 0 && g.c_out > 0;
}

std::unique_ptr<WinogradNhwcWeights> WinogradNhwcWeights::make(const float* w, int64_t c_out,
                                                               int64_t c_in) {
  auto out = std::make_unique<WinogradNhwcWeights>();
  out->c_out = c_out;
  out->c_in = c_in;
  out->npad = (c_out + kPanel - 1) / kPanel * kPanel;
  const std::vector<float> u = winograd_weight_transform(w, c_out, c_in);
  out->u.assign(static_cast<size_t>(16 * out->npad * c_in), 0.0f);
  // [xi][panel][ci][32]: panel p's column q is output channel p * 32 + q.
  for (int64_t xi = 0; xi < 16; ++xi) {
    for (int64_t co = 0; co < c_out; ++co) {
      float* dst = out->u.data() + (xi * out->npad + co / kPanel * kPanel) * c_in + co % kPanel;
      const float* src = u.data() + (xi * c_out + co) * c_in;
      for (int64_t ci = 0; ci < c_in; ++ci)
        dst[ci * kPanel] = src[ci];
    }
  }
  return out;
}

namespace {

void run_nhwc(const float* x, const WinogradNhwcWeights& weights, const float* bias,
              const ConvGeometry& g, float* y, const Epilogue* epilogue) {
  const int64_t th = (g.oh + 1) / 2, tw = (g.ow + 1) / 2;
  std::vector<float> padded(static_cast<size_t>(weights.npad), 0.0f);
  if (bias != nullptr) std::copy_n(bias, g.c_out, padded.begin());
  const std::vector<float> zero(static_cast<size_t>(g.c_in), 0.0f);
  const Job job{x, &weights, padded.data(), &g, y, zero.data(), th, tw};
  // Blocks of whole tile rows whose V and M fill about the L2.
  const int64_t per_tile = 16 * (g.c_in + weights.npad);
  int64_t block_rows = std::clamp<int64_t>(kBlockFloats / per_tile / tw, 1, th);
  int64_t per_image = (th + block_rows - 1) / block_rows;
  const bool by_rows = epilogue != nullptr && !epilogue->after_inputs;
  PhaseFn run = isa_build(phase_avx512, phase_avx2, phase_portable);
  const int64_t panels = weights.npad / kPanel;
  auto epilogue_rows = [&](const Block& blk, int64_t r0, int64_t r1) {
    if (!by_rows) return;
    const int64_t row = (blk.n * g.oh + 2 * r0) * g.ow * g.c_out;
    const int64_t end = (blk.n * g.oh + std::min(g.oh, 2 * r1)) * g.ow * g.c_out;
    apply_epilogue(*epilogue, row, end);
  };
  const int64_t threads = num_threads();
  if (threads > 1 && g.batch * per_image < threads) {
    // Fewer blocks than threads (small planes of many channels: resnet18's 7x7 layers of
    // 512, one block): smaller blocks would have each thread read all of U (16 MiB there),
    // so each block's phases split across threads instead, the products by (xi, panel): U is
    // read once.
    weights.scratch.resize(static_cast<size_t>(per_tile * block_rows * tw));
    for (int64_t n = 0; n < g.batch; ++n) {
      for (int64_t ty0 = 0; ty0 < th; ty0 += block_rows) {
        const int64_t ty1 = std::min(th, ty0 + block_rows);
        const Block blk{n, ty0, ty1, weights.scratch.data(),
                        weights.scratch.data() + 16 * (ty1 - ty0) * tw * g.c_in};
        parallel_for(ty1 - ty0, 1,
                     [&](int64_t a0, int64_t a1) { run(job, blk, 0, ty0 + a0, ty0 + a1); });
        parallel_for(16 * panels, 1, [&](int64_t a0, int64_t a1) { run(job, blk, 1, a0, a1); });
        parallel_for(ty1 - ty0, 1, [&](int64_t a0, int64_t a1) {
          run(job, blk, 2, ty0 + a0, ty0 + a1);
          epilogue_rows(blk, ty0 + a0, ty0 + a1);
        });
      }
    }
  } else {
    // Where the blocks do not split evenly across the threads, smaller blocks, as many as
    // that takes.
    if (threads > 1 && (g.batch * per_image) % threads != 0) {
      const int64_t want = (g.batch * per_image + threads - 1) / threads * threads;
      block_rows = std::max<int64_t>(1, th / ((want + g.batch - 1) / g.batch));
      per_image = (th + block_rows - 1) / block_rows;
    }
    parallel_for(g.batch * per_image, 1, [&](int64_t b0, int64_t b1) {
      // Each thread's block of V and M, kept between calls (about 1 MiB; more only where a
      // single tile row needs it).
      thread_local std::vector<float> scratch;
      scratch.resize(static_cast<size_t>(per_tile * block_rows * tw));
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t n = b / per_image, ty0 = b % per_image * block_rows;
        const int64_t ty1 = std::min(th, ty0 + block_rows);
        const Block blk{n, ty0, ty1, scratch.data(),
                        scratch.data() + 16 * (ty1 - ty0) * tw * g.c_in};
        run(job, blk, 0, ty0, ty1);
        run(job, blk, 1, 0, 16 * panels);
        run(job, blk, 2, ty0, ty1);
        epilogue_rows(blk, ty0, ty1);
      }
    });
  }
  if (epilogue != nullptr && !by_rows) {
    apply_epilogue_whole(*epilogue, g.batch * g.oh * g.ow * g.c_out);
  }
}

}  // namespace

void winograd_nhwc_f32(const float* x, bool x_nhwc, const WinogradNhwcWeights& weights,
                       const float* bias, const ConvGeometry& g, float* y, bool y_nhwc,
                       const Epilogue* epilogue) {
  const int64_t in_plane = g.h * g.w, out_plane = g.oh * g.ow;
  if (!x_nhwc) {  // a chain's first layer, or a layer outside every chain
    weights.layout_in.resize(static_cast<size_t>(g.batch * in_plane * g.c_in));
    for (int64_t n = 0; n < g.batch; ++n) {
      to_channels_last(x + n * g.c_in * in_plane, g.c_in, in_plane,
                       weights.layout_in.data() + n * g.c_in * in_plane);
    }
    x = weights.layout_in.data();
  }
  if (y_nhwc) {
    run_nhwc(x, weights, bias, g, y, epilogue);
    return;
  }
  // A chain's last layer, or a layer outside every chain: NHWC into a copy, then to the out,
  // and the epilogue there.
  weights.layout_out.resize(static_cast<size_t>(g.batch * out_plane * g.c_out));
  run_nhwc(x, weights, bias, g, weights.layout_out.data(), nullptr);
  for (int64_t n = 0; n < g.batch; ++n) {
    from_channels_last(weights.layout_out.data() + n * g.c_out * out_plane, g.c_out, out_plane,
                       y + n * g.c_out * out_plane);
  }
  if (epilogue != nullptr) apply_epilogue_whole(*epilogue, g.batch * out_plane * g.c_out);
}

}  // namespace etc::rt::kernels
