// Batched log-domain Sinkhorn on CUDA (same iteration as kernels/reference.py).
//
// Scaled potentials u = f/eps, v = g/eps and C/eps; each half-iteration is a log-sum-exp
// with its exact maximum subtracted first, which keeps small epsilon stable. Row LSEs use
// one block per (batch, row) with a shared-memory reduction; column LSEs one thread per
// (batch, column) walking the rows, so reads stay coalesced across threads. The host loop
// reads the per-batch error back every check_every iterations to decide when to stop.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "paperworks_cuda.h"

namespace {

constexpr int kThreads = 256;

template <typename T>
__device__ __forceinline__ T neg_inf() {
  return -INFINITY;
}

// Block-wide reduction of one value per thread; `op` is max or sum with identity `id`.
template <typename T, typename Op>
__device__ T block_reduce(T v, Op op, T id) {
  __shared__ T part[kThreads / 32];
  for (int off = 16; off > 0; off /= 2) v = op(v, __shfl_down_sync(0xffffffffu, v, off));
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    v = threadIdx.x < kThreads / 32 ? part[threadIdx.x] : id;
    for (int off = 16; off > 0; off /= 2) v = op(v, __shfl_down_sync(0xffffffffu, v, off));
  }
  __syncthreads();
  return v;  // valid in thread 0
}

struct Max {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return a > b ? a : b;
  }
};
struct Sum {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
};

template <typename T>
__global__ void scale_kernel(const T* in, T* out, int64_t size, T factor) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < size;
       e += int64_t(gridDim.x) * blockDim.x)
    out[e] = in[e] * factor;
}

// lse[r] = LSE_j(v[b, j] - ce[r, j]) for row r = b * n + i.
template <typename T>
__global__ void row_lse_kernel(const T* v, const T* ce, int64_t n, int64_t m, T* lse) {
  const int64_t r = blockIdx.x;
  const T* vb = v + (r / n) * m;
  const T* row = ce + r * m;
  T mx = neg_inf<T>();
  for (int64_t j = threadIdx.x; j < m; j += kThreads) mx = max(mx, vb[j] - row[j]);
  mx = block_reduce(mx, Max(), neg_inf<T>());
  __shared__ T shared_max;
  if (threadIdx.x == 0) shared_max = mx;
  __syncthreads();
  mx = shared_max;
  T s = 0;
  if (mx != neg_inf<T>())
    for (int64_t j = threadIdx.x; j < m; j += kThreads) s += exp(vb[j] - row[j] - mx);
  s = block_reduce(s, Sum(), T(0));
  if (threadIdx.x == 0) lse[r] = mx == neg_inf<T>() ? mx : mx + log(s);
}

// error[b] = sum_i |exp(u + lse) - a| (row marginal of the current plan).
template <typename T>
__global__ void row_error_kernel(const T* u, const T* lse, const T* a, int64_t n, T* error) {
  const int64_t b = blockIdx.x;
  T e = 0;
  for (int64_t i = threadIdx.x; i < n; i += kThreads)
    e += fabs(exp(u[b * n + i] + lse[b * n + i]) - a[b * n + i]);
  e = block_reduce(e, Sum(), T(0));
  if (threadIdx.x == 0) error[b] = e;
}

template <typename T>
__global__ void set_u_kernel(const T* a, const T* lse, int64_t size, T* u) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < size;
       e += int64_t(gridDim.x) * blockDim.x)
    u[e] = log(a[e]) - lse[e];
}

// v[b, j] = log b[b, j] - LSE_i(u[b, i] - ce[b, i, j]), one thread per column.
template <typename T>
__global__ void column_kernel(const T* u, const T* ce, const T* bm, int64_t batch, int64_t n,
                              int64_t m, T* v) {
  const int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (e >= batch * m) return;
  const int64_t b = e / m, j = e % m;
  const T* ub = u + b * n;
  const T* col = ce + b * n * m + j;
  T mx = neg_inf<T>();
  for (int64_t i = 0; i < n; ++i) mx = max(mx, ub[i] - col[i * m]);
  T s = 0;
  if (mx != neg_inf<T>())
    for (int64_t i = 0; i < n; ++i) s += exp(ub[i] - col[i * m] - mx);
  v[e] = log(bm[e]) - (mx == neg_inf<T>() ? mx : mx + log(s));
}

// plan = exp(u_i + v_j - ce_ij) in place over ce; total[b] += sum plan * cost.
template <typename T>
__global__ void plan_kernel(const T* u, const T* v, const T* cost, int64_t n, int64_t m, T* plan,
                            T* total) {
  const int64_t r = blockIdx.x;
  const T* vb = v + (r / n) * m;
  T* row = plan + r * m;
  T c = 0;
  for (int64_t j = threadIdx.x; j < m; j += kThreads) {
    row[j] = exp(u[r] + vb[j] - row[j]);
    c += row[j] * cost[r * m + j];
  }
  c = block_reduce(c, Sum(), T(0));
  if (threadIdx.x == 0) atomicAdd(total + r / n, c);
}

unsigned blocks_for(int64_t size) {
  return unsigned(std::min<int64_t>((size + kThreads - 1) / kThreads, 65535));
}

template <typename T>
int sinkhorn(const T* cost, const T* a, const T* b, int64_t batch, int64_t n, int64_t m, double eps,
             int64_t max_iter, double tol, int64_t check_every, T* plan, T* total_cost, T* f, T* g,
             T* error, T* lse, int64_t* n_iter, void* stream_ptr) {
  cudaStream_t stream = cudaStream_t(stream_ptr);
  const int64_t size = batch * n * m;
  T* ce = plan;
  T* u = f;
  T* v = g;
  scale_kernel<<<blocks_for(size), kThreads, 0, stream>>>(cost, ce, size, T(1.0 / eps));
  cudaMemsetAsync(u, 0, sizeof(T) * batch * n, stream);
  cudaMemsetAsync(v, 0, sizeof(T) * batch * m, stream);
  std::vector<T> host_error(batch);
  int64_t done = 0;
  for (int64_t it = 0; it < max_iter; ++it) {
    row_lse_kernel<<<unsigned(batch * n), kThreads, 0, stream>>>(v, ce, n, m, lse);
    if (it > 0 && it % check_every == 0) {
      row_error_kernel<<<unsigned(batch), kThreads, 0, stream>>>(u, lse, a, n, error);
      cudaMemcpyAsync(host_error.data(), error, sizeof(T) * batch, cudaMemcpyDeviceToHost, stream);
      if (cudaError_t err = cudaStreamSynchronize(stream)) return int(err);
      if (*std::max_element(host_error.begin(), host_error.end()) < T(tol)) break;
    }
    set_u_kernel<<<blocks_for(batch * n), kThreads, 0, stream>>>(a, lse, batch * n, u);
    column_kernel<<<unsigned((batch * m + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
        u, ce, b, batch, n, m, v);
    done = it + 1;
  }
  row_lse_kernel<<<unsigned(batch * n), kThreads, 0, stream>>>(v, ce, n, m, lse);
  row_error_kernel<<<unsigned(batch), kThreads, 0, stream>>>(u, lse, a, n, error);
  cudaMemsetAsync(total_cost, 0, sizeof(T) * batch, stream);
  plan_kernel<<<unsigned(batch * n), kThreads, 0, stream>>>(u, v, cost, n, m, plan, total_cost);
  scale_kernel<<<blocks_for(batch * n), kThreads, 0, stream>>>(u, f, batch * n, T(eps));
  scale_kernel<<<blocks_for(batch * m), kThreads, 0, stream>>>(v, g, batch * m, T(eps));
  *n_iter = done;
  return int(cudaGetLastError());
}

}  // namespace

extern "C" int pwk_sinkhorn_f32(const float* cost, const float* a, const float* b, int64_t batch,
                                int64_t n, int64_t m, double eps, int64_t max_iter, double tol,
                                int64_t check_every, float* plan, float* total_cost, float* f,
                                float* g, float* error, float* lse, int64_t* n_iter, void* stream) {
  return sinkhorn<float>(cost, a, b, batch, n, m, eps, max_iter, tol, check_every, plan, total_cost,
                         f, g, error, lse, n_iter, stream);
}

extern "C" int pwk_sinkhorn_f64(const double* cost, const double* a, const double* b, int64_t batch,
                                int64_t n, int64_t m, double eps, int64_t max_iter, double tol,
                                int64_t check_every, double* plan, double* total_cost, double* f,
                                double* g, double* error, double* lse, int64_t* n_iter,
                                void* stream) {
  return sinkhorn<double>(cost, a, b, batch, n, m, eps, max_iter, tol, check_every, plan,
                          total_cost, f, g, error, lse, n_iter, stream);
}
