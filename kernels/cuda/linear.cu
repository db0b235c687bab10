// Low-bit linear layers (sign bits, 2-bit codes, vector codes) for batch 1..64 on CUDA.
//
// One warp per output row, 8 rows per block, up to kTile batch rows per block. The input
// dim is walked in chunks of 32 packed words: each lane loads one 32-bit word of its row
// (a coalesced 128-byte read per warp) and decodes it in registers; the matching
// activations sit in shared memory transposed so that lane l reading column j of its word
// hits bank l (no conflicts). Lanes are summed with shuffles at the end.
#include <cuda_runtime.h>

#include <cstdint>

#include "paperworks_cuda.h"

namespace {

constexpr int kWarps = 8;
constexpr int kTile = 4;

// Word `word` (4 bytes, little endian) of a packed row; bytes past the row read as 0.
__device__ __forceinline__ uint32_t load_word(const uint8_t* row, int64_t row_bytes, int64_t word) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) {
    const int64_t byte = 4 * word + i;
    if (byte < row_bytes) v |= uint32_t(row[byte]) << (8 * i);
  }
  return v;
}

// Stages x[b0 : b0 + kTile, c0 : c0 + 32 * COLS] as xs[b][j][lane] = x[b, c0 + COLS*lane + j].
template <int COLS>
__device__ void stage_x(const float* x, int64_t batch, int64_t m, int64_t b0, int64_t c0,
                        float* xs) {
  constexpr int chunk = 32 * COLS;
  for (int e = threadIdx.x; e < kTile * chunk; e += blockDim.x) {
    const int b = e / chunk, c = e % chunk;
    const int64_t col = c0 + c;
    xs[(b * COLS + c % COLS) * 32 + c / COLS] =
        (b0 + b < batch && col < m) ? x[(b0 + b) * m + col] : 0.f;
  }
}

__device__ void finish(float* acc, int64_t row, int64_t n, int64_t batch, int64_t b0,
                       const float* bias, float* y) {
  const int lane = threadIdx.x % 32;
  for (int b = 0; b < kTile; ++b)
    for (int off = 16; off > 0; off /= 2) acc[b] += __shfl_down_sync(0xffffffffu, acc[b], off);
  if (lane == 0 && row < n)
    for (int b = 0; b < kTile && b0 + b < batch; ++b)
      y[(b0 + b) * n + row] = acc[b] + (bias ? bias[row] : 0.f);
}

// Runs the chunk loop shared by all three formats; decode(row, lane_word, j, col) gives the
// weight of column `col`, bit/code position j of the lane's word(s).
template <int COLS, typename Decode>
__device__ void linear_rows(const float* x, int64_t batch, int64_t m, int64_t n, const float* bias,
                            float* y, Decode decode) {
  __shared__ float xs[kTile * COLS * 32];
  const int lane = threadIdx.x % 32;
  const int64_t row = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
  const int64_t b0 = int64_t(blockIdx.y) * kTile;
  float acc[kTile] = {};
  for (int64_t c0 = 0; c0 < m; c0 += 32 * COLS) {
    __syncthreads();
    stage_x<COLS>(x, batch, m, b0, c0, xs);
    __syncthreads();
    if (row >= n) continue;
    const int64_t word = c0 / COLS + lane;
    decode.load(row, word);
    for (int j = 0; j < COLS; ++j) {
      const float w = decode(row, j, c0 + COLS * lane + j);
      for (int b = 0; b < kTile; ++b) acc[b] += w * xs[(b * COLS + j) * 32 + lane];
    }
  }
  finish(acc, row, n, batch, b0, bias, y);
}

constexpr int kMaxPaths = 8;

struct SignDecode {
  const uint8_t* signs;
  const float* alpha;
  int64_t paths, n, row_bytes;
  uint32_t bits[kMaxPaths];
  __device__ void load(int64_t row, int64_t word) {
    for (int k = 0; k < paths; ++k)
      bits[k] = load_word(signs + (k * n + row) * row_bytes, row_bytes, word);
  }
  __device__ float operator()(int64_t row, int j, int64_t) const {
    float w = 0.f;
    for (int k = 0; k < paths; ++k)
      w += ((bits[k] >> j) & 1u) ? alpha[k * n + row] : -alpha[k * n + row];
    return w;
  }
};

struct Int2Decode {
  const uint8_t* codes;
  const float *scale, *offset;
  int64_t m, group, groups, row_bytes;
  uint32_t bits;
  __device__ void load(int64_t row, int64_t word) {
    bits = load_word(codes + row * row_bytes, row_bytes, word);
  }
  __device__ float operator()(int64_t row, int j, int64_t col) const {
    if (col >= m) return 0.f;  // padding codes; their group may lie past the row
    const int64_t g = row * groups + col / group;
    return scale[g] * float((bits >> (2 * j)) & 3u) + (offset ? offset[g] : 0.f);
  }
};

struct VqDecode {
  const uint8_t* codes;
  const float *codebook, *scale;
  int64_t m, group, groups, row_bytes;
  uint32_t bits;
  __device__ void load(int64_t row, int64_t word) {
    bits = load_word(codes + row * row_bytes, row_bytes, word);
  }
  __device__ float operator()(int64_t row, int j, int64_t col) const {
    if (col >= m) return 0.f;
    const uint32_t code = (bits >> (8 * (j / 4))) & 255u;
    const float w = codebook[4 * code + j % 4];
    return scale ? w * scale[row * groups + col / group] : w;
  }
};

__global__ void binary_kernel(const float* x, int64_t batch, int64_t m, int64_t n,
                              const float* bias, float* y, SignDecode decode) {
  linear_rows<32>(x, batch, m, n, bias, y, decode);
}

__global__ void int2_kernel(const float* x, int64_t batch, int64_t m, int64_t n, const float* bias,
                            float* y, Int2Decode decode) {
  linear_rows<16>(x, batch, m, n, bias, y, decode);
}

__global__ void vq_kernel(const float* x, int64_t batch, int64_t m, int64_t n, const float* bias,
                          float* y, VqDecode decode) {
  linear_rows<16>(x, batch, m, n, bias, y, decode);
}

dim3 grid_for(int64_t batch, int64_t n) {
  return dim3(unsigned((n + kWarps - 1) / kWarps), unsigned((batch + kTile - 1) / kTile));
}

}  // namespace

extern "C" int pwk_binary_linear(const float* x, int64_t batch, int64_t m, const uint8_t* signs,
                                 const float* alpha, int64_t paths, int64_t n, const float* bias,
                                 float* y, void* stream) {
  if (paths > kMaxPaths) return int(cudaErrorInvalidValue);
  SignDecode d{signs, alpha, paths, n, (m + 7) / 8, {}};
  binary_kernel<<<grid_for(batch, n), 32 * kWarps, 0, cudaStream_t(stream)>>>(x, batch, m, n, bias,
                                                                              y, d);
  return int(cudaGetLastError());
}

extern "C" int pwk_int2_linear(const float* x, int64_t batch, int64_t m, const uint8_t* codes,
                               const float* scale, const float* offset, int64_t group, int64_t n,
                               const float* bias, float* y, void* stream) {
  Int2Decode d{codes, scale, offset, m, group, (m + group - 1) / group, (m + 3) / 4, 0};
  int2_kernel<<<grid_for(batch, n), 32 * kWarps, 0, cudaStream_t(stream)>>>(x, batch, m, n, bias, y,
                                                                            d);
  return int(cudaGetLastError());
}

extern "C" int pwk_vq_linear(const float* x, int64_t batch, int64_t m, const uint8_t* codes,
                             const float* codebook, const float* scale, int64_t group, int64_t n,
                             const float* bias, float* y, void* stream) {
  if (!scale || group <= 0) group = m;
  VqDecode d{codes, codebook, scale, m, group, (m + group - 1) / group, (m + 3) / 4, 0};
  vq_kernel<<<grid_for(batch, n), 32 * kWarps, 0, cudaStream_t(stream)>>>(x, batch, m, n, bias, y,
                                                                          d);
  return int(cudaGetLastError());
}
