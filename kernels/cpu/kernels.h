// Raw-pointer CPU kernels behind paperworks.kernels' CPU backend.
//
// Kept free of torch headers so that each kernel file compiles in seconds; bindings.cpp
// alone includes ATen and turns tensors into these arguments. Packed formats are those of
// kernels/packing.py. `threads` is the OpenMP team size (torch's intra-op thread count) and
// `simd` = false forces the portable scalar path, which the tests compare with the SIMD one.
#pragma once

#include <cstdint>
#include <functional>

namespace pwk {

// Team size for `work` units: parallel regions cost a barrier each, and on a loaded machine
// a barrier can wait a whole scheduler slice for a descheduled thread, so small problems
// (or the many small regions of an iterative solver) run on fewer threads.
inline int team_size(int threads, int64_t work, int64_t grain) {
  const int64_t useful = work / grain;
  return static_cast<int>(useful < 1 ? 1 : (useful < threads ? useful : threads));
}

// y[B, N] = sum_k alpha[k, n] * (sign(W_k) x)[n] + bias[n]; signs is (K, N, ceil(M/8)).
void binary_linear(const float* x, int64_t batch, int64_t m, const uint8_t* signs,
                   const float* alpha, int64_t paths, int64_t n, const float* bias, float* y,
                   int threads, bool simd);

// y = x W^T + bias with W[n, i] = scale[n, i/G] * code + offset[n, i/G] (offset may be null).
void int2_linear(const float* x, int64_t batch, int64_t m, const uint8_t* codes, const float* scale,
                 const float* offset, int64_t group, int64_t n, const float* bias, float* y,
                 int threads, bool simd);

// y = x W^T + bias with W[n, 4i:4i+4] = codebook[codes[n, i]] * scale[n, 4i/G] (scale may be
// null, then G is ignored).
void vq_linear(const float* x, int64_t batch, int64_t m, const uint8_t* codes,
               const float* codebook, const float* scale, int64_t group, int64_t n,
               const float* bias, float* y, int threads, bool simd);

// Batched log-domain Sinkhorn. `plan` (B, n, m) doubles as scratch for C / eps; outputs
// cost (B), f (B, n), g (B, m), error (B). Returns the number of full iterations done.
template <typename T>
int64_t sinkhorn(const T* cost, const T* a, const T* b, int64_t batch, int64_t n, int64_t m,
                 double eps, int64_t max_iter, double tol, int64_t check_every, T* plan,
                 T* total_cost, T* f, T* g, T* error, int threads);

// Output buffers of grid_contract, allocated by the caller once the sizes are known.
struct GridBuffers {
  int64_t* region_count;
  double* region_sum;
  double* region_sq_sum;
  int64_t* edges;  // (E, 2) row-major
  int64_t* edge_count;
  double* edge_weight_sum;
};
using GridAllocator = std::function<GridBuffers(int64_t regions, int64_t edges)>;

// Contracts every edge of a (d, h, w) grid whose weight (3, d, h, w) is < threshold; writes
// the region of every voxel to `labels` (numbered by first voxel in raster order) and the
// region sums and region adjacency into the buffers returned by `allocate`.
void grid_contract(const float* image, const float* weights, int64_t d, int64_t h, int64_t w,
                   float threshold, int64_t* labels, const GridAllocator& allocate, int threads);

}  // namespace pwk
