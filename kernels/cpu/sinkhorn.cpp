// Batched log-domain Sinkhorn on the CPU.
//
// Works on scaled potentials u = f/eps, v = g/eps and the scaled cost C/eps, so every
// update is a log-sum-exp: u_i = log a_i - LSE_j(v_j - C_ij/eps) and likewise for v. Each
// LSE subtracts its exact maximum first (one max pass, one exp pass), which keeps small
// epsilon stable. Rows are contiguous, so the row update runs over (batch, row) and the
// column update over (batch, block of columns), both with OpenMP; for float32 the exp is a
// vectorized Cephes polynomial (AVX-512), otherwise std::exp.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace pwk {
namespace {

constexpr int64_t kColumnBlock = 256;

template <typename T>
constexpr T neg_inf() {
  return -std::numeric_limits<T>::infinity();
}

#if defined(__AVX512F__)
// Cephes expf on 16 lanes, about 1 ulp; inputs below -150 (and -inf) give exactly 0.
inline __m512 exp16(__m512 x) {
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-150.f)), _mm512_set1_ps(88.7f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.f)));
  return _mm512_scalef_ps(p, n);
}

inline __mmask16 tail_mask(int64_t left) { return _cvtu32_mask16((1u << left) - 1u); }

// log sum_j exp(v_j - r_j), float32.
float row_lse(const float* v, const float* r, int64_t m) {
  const int64_t full = m & ~int64_t{15};
  const __mmask16 k = tail_mask(m - full);
  __m512 vmax = _mm512_set1_ps(neg_inf<float>());
  for (int64_t j = 0; j < full; j += 16)
    vmax = _mm512_max_ps(vmax, _mm512_sub_ps(_mm512_loadu_ps(v + j), _mm512_loadu_ps(r + j)));
  if (full < m)
    vmax = _mm512_mask_max_ps(
        vmax, k, vmax,
        _mm512_sub_ps(_mm512_maskz_loadu_ps(k, v + full), _mm512_maskz_loadu_ps(k, r + full)));
  const float mx = _mm512_reduce_max_ps(vmax);
  if (mx == neg_inf<float>()) return mx;
  const __m512 vmx = _mm512_set1_ps(mx);
  __m512 sum = _mm512_setzero_ps();
  for (int64_t j = 0; j < full; j += 16)
    sum = _mm512_add_ps(
        sum,
        exp16(_mm512_sub_ps(_mm512_sub_ps(_mm512_loadu_ps(v + j), _mm512_loadu_ps(r + j)), vmx)));
  if (full < m)
    sum = _mm512_mask_add_ps(sum, k, sum,
                             exp16(_mm512_sub_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, v + full),
                                                               _mm512_maskz_loadu_ps(k, r + full)),
                                                 vmx)));
  return mx + std::log(_mm512_reduce_add_ps(sum));
}

// lse[j] = log sum_i exp(u_i - ce[i, j]) for columns [j0, j1), float32.
void column_lse(const float* u, const float* ce, int64_t n, int64_t m, int64_t j0, int64_t j1,
                float* lse) {
  for (int64_t j = j0; j < j1; j += 16) {
    const __mmask16 k = tail_mask(std::min<int64_t>(16, j1 - j));
    __m512 vmax = _mm512_set1_ps(neg_inf<float>());
    for (int64_t i = 0; i < n; ++i)
      vmax = _mm512_max_ps(
          vmax, _mm512_sub_ps(_mm512_set1_ps(u[i]), _mm512_maskz_loadu_ps(k, ce + i * m + j)));
    __m512 sum = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; ++i) {
      const __m512 t =
          _mm512_sub_ps(_mm512_set1_ps(u[i]), _mm512_maskz_loadu_ps(k, ce + i * m + j));
      sum = _mm512_add_ps(sum, exp16(_mm512_sub_ps(t, vmax)));
    }
    alignas(64) float mx[16], s[16];
    _mm512_store_ps(mx, vmax);
    _mm512_store_ps(s, sum);
    for (int64_t c = 0; c < std::min<int64_t>(16, j1 - j); ++c)
      lse[j + c] = mx[c] == neg_inf<float>() ? mx[c] : mx[c] + std::log(s[c]);
  }
}
#endif

template <typename T>
T row_lse(const T* v, const T* r, int64_t m) {
  T mx = neg_inf<T>();
  for (int64_t j = 0; j < m; ++j) mx = std::max(mx, v[j] - r[j]);
  if (mx == neg_inf<T>()) return mx;
  T s = 0;
  for (int64_t j = 0; j < m; ++j) s += std::exp(v[j] - r[j] - mx);
  return mx + std::log(s);
}

template <typename T>
void column_lse(const T* u, const T* ce, int64_t n, int64_t m, int64_t j0, int64_t j1, T* lse) {
  std::vector<T> mx(j1 - j0, neg_inf<T>()), s(j1 - j0, 0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = j0; j < j1; ++j) mx[j - j0] = std::max(mx[j - j0], u[i] - ce[i * m + j]);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = j0; j < j1; ++j) s[j - j0] += std::exp(u[i] - ce[i * m + j] - mx[j - j0]);
  for (int64_t j = j0; j < j1; ++j)
    lse[j] = mx[j - j0] == neg_inf<T>() ? mx[j - j0] : mx[j - j0] + std::log(s[j - j0]);
}

// lse[b, i] = LSE_j(v[b, j] - ce[b, i, j]) for every row of the batch.
template <typename T>
void all_row_lse(const T* v, const T* ce, int64_t batch, int64_t n, int64_t m, T* lse,
                 int threads) {
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t r = 0; r < batch * n; ++r) lse[r] = row_lse(v + (r / n) * m, ce + r * m, m);
}

// L1 distance of the plan's row sums exp(u + lse) from a, per batch element.
template <typename T>
void row_error(const T* u, const T* lse, const T* a, int64_t batch, int64_t n, T* error) {
  for (int64_t b = 0; b < batch; ++b) {
    double e = 0;
    for (int64_t i = b * n; i < (b + 1) * n; ++i) e += std::abs(std::exp(u[i] + lse[i]) - a[i]);
    error[b] = static_cast<T>(e);
  }
}

}  // namespace

template <typename T>
int64_t sinkhorn(const T* cost, const T* a, const T* b, int64_t batch, int64_t n, int64_t m,
                 double eps, int64_t max_iter, double tol, int64_t check_every, T* plan,
                 T* total_cost, T* f, T* g, T* error, int threads) {
  const int64_t size = batch * n * m;
  threads = team_size(threads, size, int64_t{1} << 15);
  T* ce = plan;  // scratch until the plan is written at the end
  const T inv_eps = static_cast<T>(1.0 / eps);
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t e = 0; e < size; ++e) ce[e] = cost[e] * inv_eps;
  std::vector<T> u(batch * n, 0), v(batch * m, 0), lse(batch * n), log_a(batch * n),
      log_b(batch * m);
  for (int64_t i = 0; i < batch * n; ++i) log_a[i] = std::log(a[i]);
  for (int64_t j = 0; j < batch * m; ++j) log_b[j] = std::log(b[j]);
  const int64_t blocks = (m + kColumnBlock - 1) / kColumnBlock;
  int64_t done = 0;
  for (int64_t it = 0; it < max_iter; ++it) {
    all_row_lse(v.data(), ce, batch, n, m, lse.data(), threads);
    if (it > 0 && it % check_every == 0) {
      row_error(u.data(), lse.data(), a, batch, n, error);
      if (*std::max_element(error, error + batch) < tol) break;
    }
    for (int64_t i = 0; i < batch * n; ++i) u[i] = log_a[i] - lse[i];
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t task = 0; task < batch * blocks; ++task) {
      const int64_t bb = task / blocks, j0 = (task % blocks) * kColumnBlock;
      const int64_t j1 = std::min(j0 + kColumnBlock, m);
      T* vb = v.data() + bb * m;
      column_lse(u.data() + bb * n, ce + bb * n * m, n, m, j0, j1, vb);
      for (int64_t j = j0; j < j1; ++j) vb[j] = log_b[bb * m + j] - vb[j];
    }
    done = it + 1;
  }
  all_row_lse(v.data(), ce, batch, n, m, lse.data(), threads);
  row_error(u.data(), lse.data(), a, batch, n, error);
  std::vector<double> row_cost(batch * n);
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t r = 0; r < batch * n; ++r) {
    const T* vb = v.data() + (r / n) * m;
    T* p = plan + r * m;
    double c = 0;
    for (int64_t j = 0; j < m; ++j) {
      p[j] = std::exp(u[r] + vb[j] - p[j]);
      c += static_cast<double>(p[j]) * cost[r * m + j];
    }
    row_cost[r] = c;
  }
  for (int64_t bb = 0; bb < batch; ++bb) {
    double c = 0;
    for (int64_t i = 0; i < n; ++i) c += row_cost[bb * n + i];
    total_cost[bb] = static_cast<T>(c);
  }
  for (int64_t i = 0; i < batch * n; ++i) f[i] = static_cast<T>(u[i] * eps);
  for (int64_t j = 0; j < batch * m; ++j) g[j] = static_cast<T>(v[j] * eps);
  return done;
}

template int64_t sinkhorn<float>(const float*, const float*, const float*, int64_t, int64_t,
                                 int64_t, double, int64_t, double, int64_t, float*, float*, float*,
                                 float*, float*, int);
template int64_t sinkhorn<double>(const double*, const double*, const double*, int64_t, int64_t,
                                  int64_t, double, int64_t, double, int64_t, double*, double*,
                                  double*, double*, double*, int);

}  // namespace pwk
