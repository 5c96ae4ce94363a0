// Shared by the convolution tests (conv_test.cpp, conv_algorithms_test.cpp): a case's
// geometry, the direct double loop every kernel is checked against, ATen's output size, and
// convolution.out's inputs for a plain 2-d call.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/kernel_test_util.h"

namespace etc::rt::test {

struct ConvCase {
  int64_t n, c_in, h, w, c_out, kh, kw;
  int64_t sh, sw, ph, pw, dh, dw;
  int64_t groups;
  bool transposed;
  int64_t oph, opw;
  bool bias;
};

// Direct definition: out[n, co, oh, ow] = bias + sum x[n, ci, ih, iw] * w[...] over the
// taps that land in the input.
inline std::vector<double> conv_ref(const ConvCase& k, const std::vector<double>& x,
                                    const std::vector<double>& w, const std::vector<double>& b,
                                    int64_t oh_n, int64_t ow_n) {
  std::vector<double> y(static_cast<size_t>(k.n * k.c_out * oh_n * ow_n), 0.0);
  const int64_t cin_g = k.c_in / k.groups, cout_g = k.c_out / k.groups;
  for (int64_t n = 0; n < k.n; ++n) {
    for (int64_t co = 0; co < k.c_out; ++co) {
      for (int64_t oh = 0; oh < oh_n; ++oh) {
        for (int64_t ow = 0; ow < ow_n; ++ow) {
          y[((n * k.c_out + co) * oh_n + oh) * ow_n + ow] = k.bias ? b[co] : 0;
        }
      }
    }
    for (int64_t g = 0; g < k.groups; ++g) {
      for (int64_t ci = 0; ci < cin_g; ++ci) {
        for (int64_t co = 0; co < cout_g; ++co) {
          for (int64_t i = 0; i < k.kh; ++i) {
            for (int64_t j = 0; j < k.kw; ++j) {
              const int64_t cin = g * cin_g + ci, cout = g * cout_g + co;
              if (!k.transposed) {
                const double wv = w[((cout * cin_g + ci) * k.kh + i) * k.kw + j];
                for (int64_t oh = 0; oh < oh_n; ++oh) {
                  for (int64_t ow = 0; ow < ow_n; ++ow) {
                    const int64_t ih = oh * k.sh - k.ph + i * k.dh;
                    const int64_t iw = ow * k.sw - k.pw + j * k.dw;
                    if (ih < 0 || ih >= k.h || iw < 0 || iw >= k.w) continue;
                    y[((n * k.c_out + cout) * oh_n + oh) * ow_n + ow] +=
                        wv * x[((n * k.c_in + cin) * k.h + ih) * k.w + iw];
                  }
                }
              } else {
                // Transposed: every input pixel scatters into the output.
                const double wv = w[((cin * cout_g + co) * k.kh + i) * k.kw + j];
                for (int64_t ih = 0; ih < k.h; ++ih) {
                  for (int64_t iw = 0; iw < k.w; ++iw) {
                    const int64_t oh = ih * k.sh - k.ph + i * k.dh;
                    const int64_t ow = iw * k.sw - k.pw + j * k.dw;
                    if (oh < 0 || oh >= oh_n || ow < 0 || ow >= ow_n) continue;
                    y[((n * k.c_out + cout) * oh_n + oh) * ow_n + ow] +=
                        wv * x[((n * k.c_in + cin) * k.h + ih) * k.w + iw];
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  return y;
}

// The output's spatial size, as ATen computes it (transposed or not).
inline std::pair<int64_t, int64_t> out_size(const ConvCase& k) {
  if (!k.transposed) {
    return {(k.h + 2 * k.ph - k.dh * (k.kh - 1) - 1) / k.sh + 1,
            (k.w + 2 * k.pw - k.dw * (k.kw - 1) - 1) / k.sw + 1};
  }
  return {(k.h - 1) * k.sh - 2 * k.ph + k.dh * (k.kh - 1) + k.oph + 1,
          (k.w - 1) * k.sw - 2 * k.pw + k.dw * (k.kw - 1) + k.opw + 1};
}

// convolution.out's inputs for a 2-d convolution of square stride and padding, dilation 1,
// not transposed.
inline std::vector<Value*> conv2d_inputs(Call& c, Value* x, Value* w, Value* b, int64_t stride,
                                         int64_t pad, int64_t groups) {
  return {x,
          w,
          b,
          c.ints({stride, stride}),
          c.ints({pad, pad}),
          c.ints({1, 1}),
          c.b(false),
          c.ints({0, 0}),
          c.i(groups)};
}

}  // namespace etc::rt::test
