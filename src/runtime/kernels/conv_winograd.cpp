// 3x3 stride-1 float convolutions by Winograd's F(2x2, 3x3) (see conv.h).
//
// Each 2x2 block of outputs (a tile) comes from a 4x4 window of the input: with
// V = B^T d B (the window d transformed) and U = G g G^T (the 3x3 kernel g transformed once,
// when the weights are first seen), the tile is A^T [sum over input channels of U . V] A,
// where . is elementwise over the 16 positions. The sum over input channels is one GEMM per
// position: M[xi] (C_out x tiles) = U[xi] (C_out x C_in) @ V[xi] (C_in x tiles), 16 GEMMs of
// 2.25x fewer multiply-adds in all than the direct convolution's one.
//
//   B^T = [1  0 -1  0]   G = [  1    0    0 ]   A^T = [1  1  1  0]
//         [0  1  1  0]       [ 1/2  1/2  1/2]         [0  1 -1 -1]
//         [0 -1  1  0]       [ 1/2 -1/2  1/2]
//         [0  1  0 -1]       [  0    0    1 ]
#include <algorithm>
#include <vector>

#include "runtime/kernels/conv.h"
#include "runtime/kernels/gemm.h"
#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/parallel.h"

namespace etc::rt::kernels {

std::vector<float> winograd_weight_transform(const float* w, int64_t c_out, int64_t c_in) {
  // U[xi][co][ci] = (G g G^T)[xi], in double, rounded once.
  std::vector<float> u(static_cast<size_t>(16 * c_out * c_in));
  static constexpr double kG[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
  for (int64_t co = 0; co < c_out; ++co) {
    for (int64_t ci = 0; ci < c_in; ++ci) {
      const float* g = w + (co * c_in + ci) * 9;
      double gg[4][3];  // G g
      for (int r = 0; r < 4; ++r) {
        for (int c = 0; c < 3; ++c)
          gg[r][c] = kG[r][0] * g[c] + kG[r][1] * g[3 + c] + kG[r][2] * g[6 + c];
      }
      for (int r = 0; r < 4; ++r) {
        for (int c = 0; c < 4; ++c) {
          const double v = gg[r][0] * kG[c][0] + gg[r][1] * kG[c][1] + gg[r][2] * kG[c][2];
          u[static_cast<size_t>(((r * 4 + c) * c_out + co) * c_in + ci)] = static_cast<float>(v);
        }
      }
    }
  }
  return u;
}

std::unique_ptr<WinogradWeights> WinogradWeights::make(const float* w, int64_t c_out,
                                                       int64_t c_in) {
  auto out = std::make_unique<WinogradWeights>();
  out->c_out = c_out;
  out->c_in = c_in;
  const std::vector<float> u = winograd_weight_transform(w, c_out, c_in);
  for (int xi = 0; xi < 16; ++xi) {
    out->u[xi] =
        PackedA::pack(c_out, c_in, MatrixRef<float>{u.data() + xi * c_out * c_in, c_in, 1});
  }
  return out;
}

namespace {

constexpr int64_t kL = 8;             // tiles per transform step: one 8-float vector per value
constexpr int64_t kBlockTiles = 224;  // tiles per block (see winograd_conv_f32)

// Input transform of input channels [c0, c1) for tile rows [ty0, ty1): V[xi][ci][tile] (tiles
// counted from the block's first), eight tiles of a tile row at a time (their windows'
// columns are the input's at stride 2).
__attribute__((always_inline)) inline void input_transform(const float* xn, const ConvGeometry& g,
                                                           int64_t ty0, int64_t ty1, int64_t tw,
                                                           float* v, int64_t c0, int64_t c1) {
  const int64_t tiles = (ty1 - ty0) * tw, stride_xi = g.c_in * tiles, in_plane = g.h * g.w;
  const int64_t ph = g.pad[0], pw = g.pad[1];
  for (int64_t ci = c0; ci < c1; ++ci) {
    const float* plane = xn + ci * in_plane;
    for (int64_t ty = ty0; ty < ty1; ++ty) {
      const int64_t ih0 = ty * 2 - ph;
      for (int64_t tx0 = 0; tx0 < tw; tx0 += kL) {
        const int64_t lanes = std::min(kL, tw - tx0);
        const int64_t iw0 = tx0 * 2 - pw;
        float d[4][4][kL];
        const bool inside = ih0 >= 0 && ih0 + 4 <= g.h && iw0 >= 0 &&
                            iw0 + 2 * (lanes - 1) + 4 <= g.w && lanes == kL;
        if (inside) {
          for (int r = 0; r < 4; ++r) {
            const float* row = plane + (ih0 + r) * g.w + iw0;
            for (int c = 0; c < 4; ++c) {
              for (int64_t l = 0; l < kL; ++l)
                d[r][c][l] = row[2 * l + c];
            }
          }
        } else {
          for (int r = 0; r < 4; ++r) {
            const int64_t ih = ih0 + r;
            for (int c = 0; c < 4; ++c) {
              for (int64_t l = 0; l < kL; ++l) {
                const int64_t iw = iw0 + 2 * l + c;
                d[r][c][l] = l < lanes && ih >= 0 && ih < g.h && iw >= 0 && iw < g.w
                                 ? plane[ih * g.w + iw]
                                 : 0.0f;
              }
            }
          }
        }
        float t[4][4][kL];  // B^T d
        for (int c = 0; c < 4; ++c) {
          for (int64_t l = 0; l < kL; ++l) {
            t[0][c][l] = d[0][c][l] - d[2][c][l];
            t[1][c][l] = d[1][c][l] + d[2][c][l];
            t[2][c][l] = d[2][c][l] - d[1][c][l];
            t[3][c][l] = d[1][c][l] - d[3][c][l];
          }
        }
        float* base = v + ci * tiles + (ty - ty0) * tw + tx0;
        for (int r = 0; r < 4; ++r) {  // (B^T d) B
          float vr[4][kL];
          for (int64_t l = 0; l < kL; ++l) {
            vr[0][l] = t[r][0][l] - t[r][2][l];
            vr[1][l] = t[r][1][l] + t[r][2][l];
            vr[2][l] = t[r][2][l] - t[r][1][l];
            vr[3][l] = t[r][1][l] - t[r][3][l];
          }
          for (int c = 0; c < 4; ++c) {
            float* dst = base + (r * 4 + c) * stride_xi;
            for (int64_t l = 0; l < lanes; ++l)
              dst[l] = vr[c][l];
          }
        }
      }
    }
  }
}

// Output transform of output channels [c0, c1) for tile rows [ty0, ty1): y = bias + A^T M A
// per tile, eight tiles at a time, then the epilogue on the rows written, per channel.
__attribute__((always_inline)) inline void output_transform(const float* m, const float* bias,
                                                            const ConvGeometry& g, int64_t ty0,
                                                            int64_t ty1, int64_t tw, float* yn,
                                                            const Epilogue* epilogue, int64_t first,
                                                            int64_t c0, int64_t c1) {
  const int64_t tiles = (ty1 - ty0) * tw, stride_xi = g.c_out * tiles, out_plane = g.oh * g.ow;
  for (int64_t co = c0; co < c1; ++co) {
    const float b = bias != nullptr ? bias[co] : 0.0f;
    float* out = yn + co * out_plane;
    for (int64_t ty = ty0; ty < ty1; ++ty) {
      for (int64_t tx0 = 0; tx0 < tw; tx0 += kL) {
        const int64_t lanes = std::min(kL, tw - tx0);
        const float* mt = m + co * tiles + (ty - ty0) * tw + tx0;
        float s[16][kL];
        for (int xi = 0; xi < 16; ++xi) {
          for (int64_t l = 0; l < kL; ++l)
            s[xi][l] = l < lanes ? mt[xi * stride_xi + l] : 0.0f;
        }
        const int64_t oh = ty * 2, ow0 = tx0 * 2;
        for (int r = 0; r < 2 && oh + r < g.oh; ++r) {
          float yv[2][kL];
          for (int64_t l = 0; l < kL; ++l) {
            // Row r of A^T s, then (A^T s) A.
            float t[4];
            for (int c = 0; c < 4; ++c) {
              t[c] = r == 0 ? s[c][l] + s[4 + c][l] + s[8 + c][l]
                            : s[4 + c][l] - s[8 + c][l] - s[12 + c][l];
            }
            yv[0][l] = b + (t[0] + t[1] + t[2]);
            yv[1][l] = b + (t[1] - t[2] - t[3]);
          }
          float* row = out + (oh + r) * g.ow + ow0;
          const int64_t cols = std::min(2 * lanes, g.ow - ow0);
          for (int64_t q = 0; q < cols; ++q)
            row[q] = yv[q & 1][q >> 1];
        }
      }
    }
    if (epilogue != nullptr) {
      const int64_t row0 = 2 * ty0, row1 = std::min(g.oh, 2 * ty1);
      const int64_t at = (first + co) * out_plane + row0 * g.ow;
      apply_epilogue(*epilogue, at, at + (row1 - row0) * g.ow);
    }
  }
}

__attribute__((target("avx2,fma"))) void input_transform_avx2(const float* xn,
                                                              const ConvGeometry& g, int64_t ty0,
                                                              int64_t ty1, int64_t tw, float* v,
                                                              int64_t c0, int64_t c1) {
  input_transform(xn, g, ty0, ty1, tw, v, c0, c1);
}
void input_transform_portable(const float* xn, const ConvGeometry& g, int64_t ty0, int64_t ty1,
                              int64_t tw, float* v, int64_t c0, int64_t c1) {
  input_transform(xn, g, ty0, ty1, tw, v, c0, c1);
}
__attribute__((target("avx2,fma"))) void output_transform_avx2(
    const float* m, const float* bias, const ConvGeometry& g, int64_t ty0, int64_t ty1, int64_t tw,
    float* yn, const Epilogue* epilogue, int64_t first, int64_t c0, int64_t c1) {
  output_transform(m, bias, g, ty0, ty1, tw, yn, epilogue, first, c0, c1);
}
void output_transform_portable(const float* m, const float* bias, const ConvGeometry& g,
                               int64_t ty0, int64_t ty1, int64_t tw, float* yn,
                               const Epilogue* epilogue, int64_t first, int64_t c0, int64_t c1) {
  output_transform(m, bias, g, ty0, ty1, tw, yn, epilogue, first, c0, c1);
}

}  // namespace

void winograd_conv_f32(const float* x, const WinogradWeights& weights, const float* bias,
                       const ConvGeometry& g, float* y, const Epilogue* epilogue,
                       std::vector<float>& scratch) {
  const int64_t th = (g.oh + 1) / 2, tw = (g.ow + 1) / 2;
  const int64_t c_in = g.c_in, c_out = g.c_out;
  const int64_t in_plane = g.h * g.w, out_plane = g.oh * g.ow;
  // Blocks of tile rows of about kBlockTiles tiles: a block's transformed tiles stay in cache
  // between the transforms and the GEMMs.
  const int64_t block_rows = std::clamp<int64_t>(kBlockTiles / tw, 1, th);
  scratch.resize(static_cast<size_t>(16 * (c_in + c_out) * block_rows * tw));
  float* v = scratch.data();                   // V[xi][ci][tile]
  float* m = v + 16 * c_in * block_rows * tw;  // M[xi][co][tile]
  const bool vector = gemm_float_kernel() != FloatKernel::kPortable;
  auto* in_t = vector ? input_transform_avx2 : input_transform_portable;
  auto* out_t = vector ? output_transform_avx2 : output_transform_portable;
  for (int64_t n = 0; n < g.batch; ++n) {
    const float* xn = x + n * c_in * in_plane;
    float* yn = y + n * c_out * out_plane;
    for (int64_t ty0 = 0; ty0 < th; ty0 += block_rows) {
      const int64_t ty1 = std::min(th, ty0 + block_rows), tiles = (ty1 - ty0) * tw;
      parallel_for(c_in, 4, [&](int64_t c0, int64_t c1) { in_t(xn, g, ty0, ty1, tw, v, c0, c1); });
      // The 16 products over the input channels (each GEMM splits its own work).
      const GemmInit zero{};
      for (int xi = 0; xi < 16; ++xi) {
        gemm_packed(*weights.u[xi], tiles, 1.0f, MatrixRef<float>{v + xi * c_in * tiles, tiles, 1},
                    m + xi * c_out * tiles, tiles, &zero);
      }
      parallel_for(c_out, 4, [&](int64_t c0, int64_t c1) {
        out_t(m, bias, g, ty0, ty1, tw, yn, epilogue, n * c_out, c0, c1);
      });
    }
  }
}

}  // namespace etc::rt::kernels
