/* C ABI of the paperworks CUDA kernels (the .cu files beside this header).
 *
 * Plain CUDA C++ behind extern "C" functions on raw device pointers, so the library needs
 * no torch headers (the CPU torch wheel ships none for CUDA) and Python binds it with
 * ctypes. Packed formats are those of kernels/packing.py; every tensor is contiguous.
 * `stream` is a cudaStream_t (NULL for the default stream). Each function returns a
 * cudaError_t (0 = success). */
#ifndef PAPERWORKS_CUDA_H_
#define PAPERWORKS_CUDA_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* y[B, N] = sum_k alpha[k, n] * (sign(W_k) x)[n] + bias[n]; signs (K, N, ceil(M/8)). */
int pwk_binary_linear(const float* x, int64_t batch, int64_t m, const uint8_t* signs,
                      const float* alpha, int64_t paths, int64_t n, const float* bias, float* y,
                      void* stream);

/* W[n, i] = scale[n, i/G] * code + offset[n, i/G]; codes (N, ceil(M/4)); offset may be NULL. */
int pwk_int2_linear(const float* x, int64_t batch, int64_t m, const uint8_t* codes,
                    const float* scale, const float* offset, int64_t group, int64_t n,
                    const float* bias, float* y, void* stream);

/* W[n, 4i:4i+4] = codebook[codes[n, i]] * scale[n, 4i/G]; scale may be NULL. */
int pwk_vq_linear(const float* x, int64_t batch, int64_t m, const uint8_t* codes,
                  const float* codebook, const float* scale, int64_t group, int64_t n,
                  const float* bias, float* y, void* stream);

/* Batched log-domain Sinkhorn (see kernels/reference.py). `plan` (B, n, m) is scratch for
 * C/eps until the plan is written; `lse` (B, n) is scratch; f (B, n), g (B, m), cost (B),
 * error (B) are outputs and *n_iter the number of full iterations. */
int pwk_sinkhorn_f32(const float* cost, const float* a, const float* b, int64_t batch, int64_t n,
                     int64_t m, double eps, int64_t max_iter, double tol, int64_t check_every,
                     float* plan, float* total_cost, float* f, float* g, float* error, float* lse,
                     int64_t* n_iter, void* stream);
int pwk_sinkhorn_f64(const double* cost, const double* a, const double* b, int64_t batch, int64_t n,
                     int64_t m, double eps, int64_t max_iter, double tol, int64_t check_every,
                     double* plan, double* total_cost, double* f, double* g, double* error,
                     double* lse, int64_t* n_iter, void* stream);

#ifdef __cplusplus
}
#endif

#endif /* PAPERWORKS_CUDA_H_ */
