// Low-bit linear layers for batch 1..64 (decode to small prefill) on the CPU.
//
// These GEMVs are memory-bound, so the weights are never expanded to fp32 in memory: each
// kernel streams the packed bytes once per batch tile and turns them into fp32 lanes in
// registers (AVX-512), with OpenMP over output rows.
//  * sign bits: a 16-bit word of signs is used directly as an AVX-512 lane mask, so
//    sign(W) x = 2 * (sum of x over set bits) - sum(x), one masked add per 16 weights;
//  * 2-bit codes: 16 code bytes widen to 16 int32 lanes; shifting by 2j puts the code of
//    column 4i+j in the low bits of lane i, and vpermps maps it through a 16-entry table
//    that already holds scale * code + offset for the group;
//  * vector codes: the same widened bytes index a gather from the (L1-resident) codebook.
// The code layout puts column 4i+j in lane i of plane j, so activations are reordered once
// per call to match (see permute_planes). Without AVX-512 the scalar loops below run
// (vectorized by the compiler as far as it can).
#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace pwk {
namespace {

constexpr int kTile = 8;    // batch rows whose accumulators stay in registers
constexpr int kBlock = 64;  // columns of one 2-bit SIMD block (16 code bytes)

// Calls f with std::integral_constant<int, bt> so tile sizes are compile-time constants.
template <typename F>
void with_tile(int bt, F&& f) {
  switch (bt) {
    case 1:
      f(std::integral_constant<int, 1>{});
      break;
    case 2:
      f(std::integral_constant<int, 2>{});
      break;
    case 3:
      f(std::integral_constant<int, 3>{});
      break;
    case 4:
      f(std::integral_constant<int, 4>{});
      break;
    case 5:
      f(std::integral_constant<int, 5>{});
      break;
    case 6:
      f(std::integral_constant<int, 6>{});
      break;
    case 7:
      f(std::integral_constant<int, 7>{});
      break;
    default:
      f(std::integral_constant<int, 8>{});
      break;
  }
}

inline int code2(const uint8_t* codes, int64_t col) {
  return (codes[col >> 2] >> (2 * (col & 3))) & 3;
}

// Reorders every full 64-column block of every group so that xp[p + 16j + i] = x[p + 4i + j]
// (the column order of plane j in the SIMD kernels); other columns are copied unchanged.
std::vector<float> permute_planes(const float* x, int64_t batch, int64_t m, int64_t group) {
  std::vector<float> xp(x, x + batch * m);
  for (int64_t b = 0; b < batch; ++b) {
    const float* src = x + b * m;
    float* dst = xp.data() + b * m;
    for (int64_t g0 = 0; g0 < m; g0 += group) {
      const int64_t g1 = std::min(g0 + group, m);
      for (int64_t p = g0; p + kBlock <= g1; p += kBlock)
        for (int i = 0; i < 16; ++i)
          for (int j = 0; j < 4; ++j) dst[p + 16 * j + i] = src[p + 4 * i + j];
    }
  }
  return xp;
}

template <int BT, int KP>
void masked_sums_scalar(const float* x, int64_t m, const uint8_t* const* bits, float* s) {
  for (int p = 0; p < KP; ++p)
    for (int b = 0; b < BT; ++b) {
      float t = 0.f;
      for (int64_t i = 0; i < m; ++i) t += ((bits[p][i >> 3] >> (i & 7)) & 1) ? x[b * m + i] : 0.f;
      s[p * BT + b] = t;
    }
}

template <int BT>
void int2_row_scalar(const float* x, int64_t m, const uint8_t* codes, const float* scale,
                     const float* offset, int64_t group, float* out) {
  for (int b = 0; b < BT; ++b) out[b] = 0.f;
  for (int64_t g = 0, g0 = 0; g0 < m; ++g, g0 += group) {
    const float sc = scale[g], of = offset ? offset[g] : 0.f;
    for (int64_t p = g0; p < std::min(g0 + group, m); ++p) {
      const float w = sc * code2(codes, p) + of;
      for (int b = 0; b < BT; ++b) out[b] += w * x[b * m + p];
    }
  }
}

template <int BT>
void vq_row_scalar(const float* x, int64_t m, const uint8_t* codes, const float* codebook,
                   const float* scale, int64_t group, float* out) {
  for (int b = 0; b < BT; ++b) out[b] = 0.f;
  for (int64_t g = 0, g0 = 0; g0 < m; ++g, g0 += group) {
    const float sc = scale ? scale[g] : 1.f;
    for (int64_t p = g0; p < std::min(g0 + group, m); ++p) {
      const float w = sc * codebook[4 * codes[p >> 2] + (p & 3)];
      for (int b = 0; b < BT; ++b) out[b] += w * x[b * m + p];
    }
  }
}

#if defined(__AVX512F__)
// Independent accumulator chains per batch row, enough to hide the add/FMA latency.
template <int BT>
constexpr int chains() {
  return BT >= 4 ? 1 : 4 / BT;
}

inline __mmask16 load_mask(const uint8_t* p) {
  uint16_t word;
  std::memcpy(&word, p, 2);
  return _cvtu32_mask16(word);
}

// s[p * BT + b] = sum of x[b, i] over the set bits of sign row p, for KP rows at once so
// each activation vector is loaded once for all of them. The 16-bit words of a sign row
// are loaded straight into mask registers.
template <int BT, int KP>
__attribute__((noinline)) void masked_sums_avx512(const float* __restrict x, int64_t m,
                                                  const uint8_t* __restrict bits0,
                                                  const uint8_t* __restrict bits1, float* s) {
  constexpr int NA = chains<BT * KP>();
  const uint8_t* const bits[2] = {bits0, bits1};
  __m512 acc[KP][BT][NA];
  for (auto& path : acc)
    for (auto& row : path)
      for (auto& v : row) v = _mm512_setzero_ps();
  const int64_t words = m / 16;
  int64_t w = 0;
  for (; w + NA <= words; w += NA) {
#pragma GCC unroll 4
    for (int u = 0; u < NA; ++u) {
      __mmask16 k[KP];
      for (int p = 0; p < KP; ++p) k[p] = load_mask(bits[p] + 2 * (w + u));
      for (int b = 0; b < BT; ++b) {
        const __m512 xv = _mm512_loadu_ps(x + b * m + 16 * (w + u));
        for (int p = 0; p < KP; ++p)
          acc[p][b][u] = _mm512_mask_add_ps(acc[p][b][u], k[p], acc[p][b][u], xv);
      }
    }
  }
  for (; w < words; ++w)
    for (int p = 0; p < KP; ++p) {
      const __mmask16 k = load_mask(bits[p] + 2 * w);
      for (int b = 0; b < BT; ++b)
        acc[p][b][0] =
            _mm512_mask_add_ps(acc[p][b][0], k, acc[p][b][0], _mm512_loadu_ps(x + b * m + 16 * w));
    }
  for (int p = 0; p < KP; ++p)
    for (int b = 0; b < BT; ++b) {
      float t = 0.f;
      for (int u = 0; u < NA; ++u) t += _mm512_reduce_add_ps(acc[p][b][u]);
      for (int64_t i = 16 * words; i < m; ++i)
        t += ((bits[p][i >> 3] >> (i & 7)) & 1) ? x[b * m + i] : 0.f;
      s[p * BT + b] = t;
    }
}

inline __m512i load_code_lanes(const uint8_t* codes, int64_t col) {
  return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + col / 4)));
}

template <int BT>
__attribute__((noinline)) void int2_row_avx512(const float* xp, int64_t m, const uint8_t* codes,
                                               const float* scale, const float* offset,
                                               int64_t group, float* out) {
  constexpr int NA = chains<BT>();
  // vpermps reads the low 4 bits of each lane: table entry c holds the value of code c & 3.
  const __m512 base = _mm512_set_ps(3, 2, 1, 0, 3, 2, 1, 0, 3, 2, 1, 0, 3, 2, 1, 0);
  __m512 acc[BT][NA];
  for (auto& row : acc)
    for (auto& v : row) v = _mm512_setzero_ps();
  float tail[BT] = {};
  for (int64_t g = 0, g0 = 0; g0 < m; ++g, g0 += group) {
    const int64_t g1 = std::min(g0 + group, m);
    const float sc = scale[g], of = offset ? offset[g] : 0.f;
    const __m512 table = _mm512_fmadd_ps(_mm512_set1_ps(sc), base, _mm512_set1_ps(of));
    int64_t p = g0;
    for (; p + kBlock <= g1; p += kBlock) {
      const __m512i lanes = load_code_lanes(codes, p);
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        const __m512 w = _mm512_permutexvar_ps(_mm512_srli_epi32(lanes, 2 * j), table);
        for (int b = 0; b < BT; ++b)
          acc[b][j % NA] =
              _mm512_fmadd_ps(w, _mm512_loadu_ps(xp + b * m + p + 16 * j), acc[b][j % NA]);
      }
    }
    for (; p < g1; ++p) {
      const float w = sc * code2(codes, p) + of;
      for (int b = 0; b < BT; ++b) tail[b] += w * xp[b * m + p];
    }
  }
  for (int b = 0; b < BT; ++b) {
    float t = tail[b];
    for (int u = 0; u < NA; ++u) t += _mm512_reduce_add_ps(acc[b][u]);
    out[b] = t;
  }
}

template <int BT>
__attribute__((noinline)) void vq_row_avx512(const float* xp, int64_t m, const uint8_t* codes,
                                             const float* codebook, const float* scale,
                                             int64_t group, float* out) {
  constexpr int NA = chains<BT>();
  __m512 acc[BT][NA], gacc[BT][NA];
  for (auto& row : acc)
    for (auto& v : row) v = _mm512_setzero_ps();
  float tail[BT] = {};
  for (int64_t g = 0, g0 = 0; g0 < m; ++g, g0 += group) {
    const int64_t g1 = std::min(g0 + group, m);
    for (auto& row : gacc)
      for (auto& v : row) v = _mm512_setzero_ps();
    float gtail[BT] = {};
    int64_t p = g0;
    for (; p + kBlock <= g1; p += kBlock) {
      const __m512i index = _mm512_slli_epi32(load_code_lanes(codes, p), 2);
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        const __m512 w =
            _mm512_i32gather_ps(_mm512_add_epi32(index, _mm512_set1_epi32(j)), codebook, 4);
        for (int b = 0; b < BT; ++b)
          gacc[b][j % NA] =
              _mm512_fmadd_ps(w, _mm512_loadu_ps(xp + b * m + p + 16 * j), gacc[b][j % NA]);
      }
    }
    for (; p < g1; ++p) {
      const float w = codebook[4 * codes[p >> 2] + (p & 3)];
      for (int b = 0; b < BT; ++b) gtail[b] += w * xp[b * m + p];
    }
    const float sc = scale ? scale[g] : 1.f;
    const __m512 vs = _mm512_set1_ps(sc);
    for (int b = 0; b < BT; ++b) {
      for (int u = 0; u < NA; ++u) acc[b][u] = _mm512_fmadd_ps(vs, gacc[b][u], acc[b][u]);
      tail[b] += sc * gtail[b];
    }
  }
  for (int b = 0; b < BT; ++b) {
    float t = tail[b];
    for (int u = 0; u < NA; ++u) t += _mm512_reduce_add_ps(acc[b][u]);
    out[b] = t;
  }
}
constexpr bool kHaveSimd = true;
#else
constexpr bool kHaveSimd = false;
#endif

// Runs row_fn(n, b0, bt, out) for every output row and batch tile, rows split over threads,
// and writes out + bias into y.
template <typename RowFn>
void for_rows(int64_t batch, int64_t n, int64_t m, const float* bias, float* y, int threads,
              RowFn&& row_fn) {
  threads = team_size(threads, batch * n * m, int64_t{1} << 18);
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t row = 0; row < n; ++row) {
    for (int64_t b0 = 0; b0 < batch; b0 += kTile) {
      const int bt = static_cast<int>(std::min<int64_t>(kTile, batch - b0));
      float out[kTile];
      row_fn(row, b0, bt, out);
      const float add = bias ? bias[row] : 0.f;
      for (int b = 0; b < bt; ++b) y[(b0 + b) * n + row] = out[b] + add;
    }
  }
}

}  // namespace

void binary_linear(const float* x, int64_t batch, int64_t m, const uint8_t* signs,
                   const float* alpha, int64_t paths, int64_t n, const float* bias, float* y,
                   int threads, bool simd) {
  const int64_t row_bytes = (m + 7) / 8;
  std::vector<float> xsum(batch, 0.f);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < m; ++i) xsum[b] += x[b * m + i];
  simd = simd && kHaveSimd;
  for_rows(batch, n, m, bias, y, threads, [&](int64_t row, int64_t b0, int bt, float* out) {
    for (int b = 0; b < bt; ++b) out[b] = 0.f;
    for (int64_t k0 = 0; k0 < paths; k0 += 2) {
      const int kp = paths - k0 >= 2 ? 2 : 1;
      const uint8_t* bits[2] = {signs + (k0 * n + row) * row_bytes,
                                signs + ((k0 + kp - 1) * n + row) * row_bytes};
      float s[2 * kTile];
      with_tile(bt, [&](auto tile) {
        constexpr int BT = decltype(tile)::value;
        auto run = [&](auto pair) {
          constexpr int KP = decltype(pair)::value;
#if defined(__AVX512F__)
          if (simd) return masked_sums_avx512<BT, KP>(x + b0 * m, m, bits[0], bits[1], s);
#endif
          masked_sums_scalar<BT, KP>(x + b0 * m, m, bits, s);
        };
        if (kp == 2)
          run(std::integral_constant<int, 2>{});
        else
          run(std::integral_constant<int, 1>{});
      });
      for (int p = 0; p < kp; ++p) {
        const float a = alpha[(k0 + p) * n + row];
        for (int b = 0; b < bt; ++b) out[b] += a * (2.f * s[p * bt + b] - xsum[b0 + b]);
      }
    }
  });
}

void int2_linear(const float* x, int64_t batch, int64_t m, const uint8_t* codes, const float* scale,
                 const float* offset, int64_t group, int64_t n, const float* bias, float* y,
                 int threads, bool simd) {
  const int64_t row_bytes = (m + 3) / 4, groups = (m + group - 1) / group;
  simd = simd && kHaveSimd;
  const std::vector<float> xp = simd ? permute_planes(x, batch, m, group) : std::vector<float>();
  for_rows(batch, n, m, bias, y, threads, [&](int64_t row, int64_t b0, int bt, float* out) {
    const uint8_t* c = codes + row * row_bytes;
    const float* sc = scale + row * groups;
    const float* of = offset ? offset + row * groups : nullptr;
    with_tile(bt, [&](auto tile) {
      constexpr int BT = decltype(tile)::value;
#if defined(__AVX512F__)
      if (simd) return int2_row_avx512<BT>(xp.data() + b0 * m, m, c, sc, of, group, out);
#endif
      int2_row_scalar<BT>(x + b0 * m, m, c, sc, of, group, out);
    });
  });
}

void vq_linear(const float* x, int64_t batch, int64_t m, const uint8_t* codes,
               const float* codebook, const float* scale, int64_t group, int64_t n,
               const float* bias, float* y, int threads, bool simd) {
  if (!scale) group = m;
  const int64_t row_bytes = (m + 3) / 4, groups = (m + group - 1) / group;
  simd = simd && kHaveSimd;
  const std::vector<float> xp = simd ? permute_planes(x, batch, m, group) : std::vector<float>();
  for_rows(batch, n, m, bias, y, threads, [&](int64_t row, int64_t b0, int bt, float* out) {
    const uint8_t* c = codes + row * row_bytes;
    const float* sc = scale ? scale + row * groups : nullptr;
    with_tile(bt, [&](auto tile) {
      constexpr int BT = decltype(tile)::value;
#if defined(__AVX512F__)
      if (simd) return vq_row_avx512<BT>(xp.data() + b0 * m, m, c, codebook, sc, group, out);
#endif
      vq_row_scalar<BT>(x + b0 * m, m, c, codebook, sc, group, out);
    });
  });
}

}  // namespace pwk
