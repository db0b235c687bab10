// Low-bit linear layers for batch 1..64 (decode to small prefill) on the CPU.
//
// These GEMVs should be memory-bound, so the weights are never expanded to fp32 in memory:
// each kernel streams the packed bytes once per batch tile and turns them into fp32 lanes in
// registers (AVX-512), with OpenMP over output rows.
//  * sign bits: per-call lookup tables of the 16 signed sums of every 4 activations; lanes
//    are 16 output rows (their sign rows transposed in registers), so each nibble of signs
//    picks its table entry with one vpermps and one add per 64 weights, where a masked add
//    per 16 weights (the fallback for fewer than 16 rows) was compute-bound at 2-3x the
//    time of streaming the bits;
//  * 2-bit codes: 16 code bytes widen to 16 int32 lanes; shifting by 2j puts the code of
//    column 4i+j in the low bits of lane i, and vpermps maps it through a 16-entry table
//    that already holds scale * code + offset for the group;
//  * vector codes: for batch 1-3 the same row transposition with per-call tables of
//    codebook . x per 4 columns (one gather per 64 weights and batch row); from batch 4 the
//    widened bytes index gathers from the (L1-resident) codebook, shared by the batch.
// The 2-bit layout puts column 4i+j in lane i of plane j, so activations are reordered once
// per call to match (see permute_planes). Without AVX-512 the scalar loops below run
// (vectorized by the compiler as far as it can).
#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include <omp.h>

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

// Per-call tables: while small, every thread builds its own copy, so that the only barrier
// is the end of the parallel region (on a loaded machine each barrier can wait a scheduler
// slice for a descheduled thread); larger ones are built once, split over the team.
class Tables {
 public:
  // floats per copy, plus `extra` shared floats after the copies
  Tables(int64_t floats, int64_t extra, int threads)
      : stride_((floats + 15) / 16 * 16), own_(floats <= (int64_t{1} << 20)) {
    thread_local std::vector<float> buffer;  // reused across calls
    buffer.resize(stride_ * (own_ ? threads : 1) + extra + 16);
    base_ = buffer.data() + (-reinterpret_cast<uintptr_t>(buffer.data()) / 4 & 15);
    extra_ = base_ + stride_ * (own_ ? threads : 1);
  }
  float* extra() const { return extra_; }
  // Inside the parallel region: builds (all of `items`, or this thread's share, then a
  // barrier) with build(begin, end, table) and returns this thread's table.
  template <typename Build>
  float* build(int64_t items, Build&& build) const {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    if (own_) {
      build(int64_t{0}, items, base_ + t * stride_);
      return base_ + t * stride_;
    }
    build(items * t / nt, items * (t + 1) / nt, base_);
#pragma omp barrier
    return base_;
  }
  bool shared() const { return !own_; }

 private:
  int64_t stride_;
  bool own_;
  float* base_;
  float* extra_;
};

// Sign-bit lookup tables. For each group of 4 columns c, table[c][b][i] holds the signed sum
// sum_j (bit j of i ? x : -x)[b, 4c + j], all 16 of them in one register; columns past M
// are zero so padding bits and bytes read past a row's end add nothing.
void build_sign_tables(const float* x, int64_t batch, int64_t m, int64_t c0, int64_t c1,
                       float* table) {
  __m512 sgn[4];
  for (int j = 0; j < 4; ++j) {
    alignas(64) float v[16];
    for (int i = 0; i < 16; ++i) v[i] = ((i >> j) & 1) ? 1.f : -1.f;
    sgn[j] = _mm512_load_ps(v);
  }
  for (int64_t c = c0; c < c1; ++c)
    for (int64_t b = 0; b < batch; ++b) {
      const float* xb = x + b * m;
      __m512 t = _mm512_setzero_ps();
      for (int j = 0; j < 4; ++j) {
        const float v = 4 * c + j < m ? xb[4 * c + j] : 0.f;
        t = _mm512_fmadd_ps(_mm512_set1_ps(v), sgn[j], t);
      }
      _mm512_store_ps(table + (c * batch + b) * 16, t);
    }
}

// Transposes 16 rows of 16 dwords in place: afterwards v[d] holds dword d of every row.
inline void transpose16(__m512i v[16]) {
  __m512i t[16], u[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(v[i], v[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(v[i], v[i + 1]);
  }
  // u[4g + c]: 128-bit lane L holds dword 4L + c of rows 4g..4g+3
  for (int g = 0; g < 4; ++g) {
    const __m512i* a = t + 4 * g;
    u[4 * g] = _mm512_unpacklo_epi64(a[0], a[2]);
    u[4 * g + 1] = _mm512_unpackhi_epi64(a[0], a[2]);
    u[4 * g + 2] = _mm512_unpacklo_epi64(a[1], a[3]);
    u[4 * g + 3] = _mm512_unpackhi_epi64(a[1], a[3]);
  }
  // v[4L + c] gathers lane L of u[c], u[4 + c], u[8 + c], u[12 + c]
  for (int c = 0; c < 4; ++c) {
    const __m512i p0 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x88);
    const __m512i q0 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xdd);
    const __m512i p1 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x88);
    const __m512i q1 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xdd);
    v[c] = _mm512_shuffle_i32x4(p0, p1, 0x88);
    v[4 + c] = _mm512_shuffle_i32x4(q0, q1, 0x88);
    v[8 + c] = _mm512_shuffle_i32x4(p0, p1, 0xdd);
    v[12 + c] = _mm512_shuffle_i32x4(q0, q1, 0xdd);
  }
}

// s[(p * BT + b) * 16 + r] = (sign(W_p) x_b) for the 16 rows r of a row group: lanes are
// rows, so each nibble of signs indexes (vpermps) the 16-entry table of its 4 columns: one
// permute and one add per 64 weights, with the tables shared by both paths. The sign rows
// are read 64 bytes at a time and transposed in registers (cheaper than gathers).
template <int BT, int KP>
__attribute__((noinline)) void sign_lut_rows(const float* __restrict table, int64_t batch,
                                             int64_t row_bytes, const uint8_t* bits0,
                                             const uint8_t* bits1, float* s) {
  constexpr int NA = BT * KP >= 4 ? 1 : 2;  // accumulator chains per (path, batch row)
  const uint8_t* const bits[2] = {bits0, bits1};
  __m512 acc[KP][BT][NA];
  for (auto& path : acc)
    for (auto& row : path)
      for (auto& v : row) v = _mm512_setzero_ps();
  for (int64_t c0 = 0; c0 < row_bytes; c0 += 64) {
    // a row's last chunk is read masked, its missing bytes index zero tables
    const __mmask64 k = row_bytes - c0 >= 64 ? ~__mmask64{0} : _bzhi_u64(~0ull, row_bytes - c0);
    for (int p = 0; p < KP; ++p) {
      __m512i v[16];
      for (int r = 0; r < 16; ++r) v[r] = _mm512_maskz_loadu_epi8(k, bits[p] + r * row_bytes + c0);
      // the next row group (contiguous) streams in meanwhile: 32 row streams are too many for
      // the hardware prefetcher (prefetches never fault, also past the end)
      for (int l = 0; l < 16; ++l)
        _mm_prefetch(reinterpret_cast<const char*>(bits[p] + 16 * (row_bytes + c0) + 64 * l),
                     _MM_HINT_T0);
      transpose16(v);
      const float* t = table + 32 * c0 * batch;
      for (int d = 0; d < 16; ++d) {
#pragma GCC unroll 8
        for (int q = 0; q < 8; ++q) {
          const __m512i idx = _mm512_srli_epi32(v[d], 4 * q);
          for (int b = 0; b < BT; ++b)
            acc[p][b][q % NA] = _mm512_add_ps(
                acc[p][b][q % NA],
                _mm512_permutexvar_ps(idx, _mm512_load_ps(t + ((8 * d + q) * batch + b) * 16)));
        }
      }
    }
  }
  for (int p = 0; p < KP; ++p)
    for (int b = 0; b < BT; ++b) {
      __m512 v = acc[p][b][0];
      for (int u = 1; u < NA; ++u) v = _mm512_add_ps(v, acc[p][b][u]);
      _mm512_storeu_ps(s + (p * BT + b) * 16, v);
    }
}

// VQ lookup tables for one batch row: lut[i * 256 + c] = codebook[c] . x[4i : 4i + 4], zero
// past m (so the zero codes of a masked tail read add nothing).
void build_vq_tables(const float* x, int64_t m, int64_t i0, int64_t i1, const float* codebook,
                     float* lut) {
  alignas(64) float plane[4][256];
  for (int c = 0; c < 256; ++c)
    for (int j = 0; j < 4; ++j) plane[j][c] = codebook[4 * c + j];
  for (int64_t i = i0; i < i1; ++i) {
    __m512 xv[4];
    for (int j = 0; j < 4; ++j) xv[j] = _mm512_set1_ps(4 * i + j < m ? x[4 * i + j] : 0.f);
    for (int c = 0; c < 256; c += 16) {
      __m512 t = _mm512_mul_ps(xv[0], _mm512_load_ps(plane[0] + c));
      for (int j = 1; j < 4; ++j) t = _mm512_fmadd_ps(xv[j], _mm512_load_ps(plane[j] + c), t);
      _mm512_store_ps(lut + i * 256 + c, t);
    }
  }
}

// Adds one 64-byte column chunk (c0) of 16 VQ rows to acc (lanes are rows): the codes are
// transposed like the sign bits, and each code byte gathers its row's entry of the
// (L2-resident) table of its 4 columns: one gather per 64 weights instead of four.
// With a per-group scale (group % 16 == 0) each group's partial sum is scaled as it ends.
inline __m512 vq_lut_chunk(const float* lut, const uint8_t* codes, int64_t row_bytes, int64_t c0,
                           const float* scale, int64_t groups, int64_t group, __m512 acc) {
  const __mmask64 k = row_bytes - c0 >= 64 ? ~__mmask64{0} : _bzhi_u64(~0ull, row_bytes - c0);
  __m512i v[16];
  for (int r = 0; r < 16; ++r) v[r] = _mm512_maskz_loadu_epi8(k, codes + r * row_bytes + c0);
  for (int r = 0; r < 16; ++r)  // the same chunk of the next row group
    _mm_prefetch(reinterpret_cast<const char*>(codes + (16 + r) * row_bytes + c0), _MM_HINT_T0);
  transpose16(v);
  const __m512i rows = _mm512_mullo_epi32(
      _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
      _mm512_set1_epi32(static_cast<int>(groups)));
  const __m512i low = _mm512_set1_epi32(255);
  __m512 part[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
  int64_t g = -1;
  auto flush = [&] {
    const __m512 sum = _mm512_add_ps(part[0], part[1]);
    acc = scale ? _mm512_fmadd_ps(_mm512_i32gather_ps(rows, scale + std::min(g, groups - 1), 4),
                                  sum, acc)
                : _mm512_add_ps(acc, sum);
    part[0] = part[1] = _mm512_setzero_ps();
  };
  for (int d = 0; d < 16; ++d) {
    const int64_t quad = c0 + 4 * d;
    if (scale && 4 * quad / group != g) {
      if (g >= 0) flush();
      g = 4 * quad / group;
    }
    for (int e = 0; e < 4; ++e) {
      const __m512i idx = _mm512_and_si512(_mm512_srli_epi32(v[d], 8 * e), low);
      part[e & 1] = _mm512_add_ps(part[e & 1], _mm512_i32gather_ps(idx, lut + (quad + e) * 256, 4));
    }
  }
  flush();
  return acc;
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
  simd = simd && kHaveSimd;
#if defined(__AVX512F__)
  if (simd && n >= 16) {
    const int64_t quads = 128 * ((row_bytes + 63) / 64), groups = (n + 15) / 16;
    threads = team_size(threads, batch * n * m, int64_t{1} << 18);
    const Tables tables(quads * batch * 16, 0, threads);
#pragma omp parallel num_threads(threads)
    {
      const float* table = tables.build(quads, [&](int64_t c0, int64_t c1, float* t) {
        build_sign_tables(x, batch, m, c0, c1, t);
      });
#pragma omp for schedule(static) nowait
      for (int64_t g = 0; g < groups; ++g) {
        // the last group ends at row n (overlapping its predecessor) and writes only its own rows
        const int64_t r0 = std::min(16 * g, n - 16), first = 16 * g - r0;
        for (int64_t b0 = 0; b0 < batch; b0 += kTile) {
          const int bt = static_cast<int>(std::min<int64_t>(kTile, batch - b0));
          alignas(64) float out[kTile][16] = {};
          for (int64_t k0 = 0; k0 < paths; k0 += 2) {
            const int kp = paths - k0 >= 2 ? 2 : 1;
            const uint8_t* bits0 = signs + (k0 * n + r0) * row_bytes;
            const uint8_t* bits1 = signs + ((k0 + kp - 1) * n + r0) * row_bytes;
            alignas(64) float s[2 * kTile * 16];
            with_tile(bt, [&](auto tile) {
              constexpr int BT = decltype(tile)::value;
              const float* tb = table + b0 * 16;
              if (kp == 2)
                sign_lut_rows<BT, 2>(tb, batch, row_bytes, bits0, bits1, s);
              else
                sign_lut_rows<BT, 1>(tb, batch, row_bytes, bits0, bits1, s);
            });
            for (int p = 0; p < kp; ++p)
              for (int r = first; r < 16; ++r) {
                const float a = alpha[(k0 + p) * n + r0 + r];
                for (int b = 0; b < bt; ++b) out[b][r] += a * s[(p * bt + b) * 16 + r];
              }
          }
          for (int r = first; r < 16; ++r) {
            const float add = bias ? bias[r0 + r] : 0.f;
            for (int b = 0; b < bt; ++b) y[(b0 + b) * n + r0 + r] = out[b][r] + add;
          }
        }
      }
    }
    return;
  }
#endif
  std::vector<float> xsum(batch, 0.f);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < m; ++i) xsum[b] += x[b * m + i];
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
#if defined(__AVX512F__)
  // per-row tables pay off while one gather per batch row and 64 weights stays below the
  // four per 64 weights (shared by the batch) of the codebook kernel
  if (simd && n >= 16 && batch < 4 && (!scale || group % 16 == 0)) {
    const int64_t quads = 64 * ((row_bytes + 63) / 64), ngroups = (n + 15) / 16;
    threads = team_size(threads, batch * n * m, int64_t{1} << 18);
    const Tables tables(quads * 256, ngroups * 16, threads);
    float* sums = tables.extra();
#pragma omp parallel num_threads(threads)
    {
      const int t = omp_get_thread_num(), nt = omp_get_num_threads();
      const int64_t g0 = ngroups * t / nt, g1 = ngroups * (t + 1) / nt;
      for (int64_t b = 0; b < batch; ++b) {
        const float* lut = tables.build(quads, [&](int64_t i0, int64_t i1, float* l) {
          build_vq_tables(x + b * m, m, i0, i1, codebook, l);
        });
        // column chunks outer: a chunk's 64 KiB of tables stays in L2 for all of this
        // thread's rows (the last group overlaps its predecessor, see binary_linear)
        for (int64_t c0 = 0; c0 < row_bytes; c0 += 64)
          for (int64_t g = g0; g < g1; ++g) {
            const int64_t r0 = std::min(16 * g, n - 16);
            const __m512 acc = c0 ? _mm512_load_ps(sums + 16 * g) : _mm512_setzero_ps();
            _mm512_store_ps(sums + 16 * g,
                            vq_lut_chunk(lut, codes + r0 * row_bytes, row_bytes, c0,
                                         scale ? scale + r0 * groups : nullptr, groups, group,
                                         acc));
          }
        for (int64_t g = g0; g < g1; ++g) {
          const int64_t r0 = std::min(16 * g, n - 16);
          for (int64_t r = 16 * g - r0; r < 16; ++r)
            y[b * n + r0 + r] = sums[16 * g + r] + (bias ? bias[r0 + r] : 0.f);
        }
        if (tables.shared()) {
#pragma omp barrier  // before the next batch row's tables overwrite these
        }
      }
    }
    return;
  }
#endif
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
