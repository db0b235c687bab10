// Torch operator bindings of the CPU kernels, registered as torch.ops.paperworks_cpu.*.
//
// The only translation unit that includes torch headers, and only the light ones
// (TORCH_LIBRARY instead of pybind11), so the extension builds in seconds. Python
// (kernels/cpu/backend.py) validates shapes; these checks only guard the raw pointers.
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <torch/library.h>

#include <optional>
#include <tuple>
#include <vector>

#include "kernels.h"

namespace {

using at::Tensor;
using OptTensor = std::optional<Tensor>;

void check(const Tensor& t, at::ScalarType dtype, const char* name) {
  TORCH_CHECK(t.device().is_cpu(), name, " must be on the CPU");
  TORCH_CHECK(t.scalar_type() == dtype, name, " has dtype ", t.scalar_type(), ", expected ", dtype);
  TORCH_CHECK(t.is_contiguous(), name, " must be contiguous");
}

const float* opt_ptr(const OptTensor& t, const char* name) {
  if (!t.has_value()) return nullptr;
  check(*t, at::kFloat, name);
  return t->data_ptr<float>();
}

Tensor linear_output(const Tensor& x, int64_t n) {
  check(x, at::kFloat, "x");
  TORCH_CHECK(x.dim() == 2, "x must be (B, M)");
  return at::empty({x.size(0), n}, x.options());
}

Tensor binary_linear(const Tensor& x, const Tensor& signs, const Tensor& alpha,
                     const OptTensor& bias, bool simd) {
  check(signs, at::kByte, "signs");
  check(alpha, at::kFloat, "alpha");
  Tensor y = linear_output(x, signs.size(1));
  pwk::binary_linear(x.data_ptr<float>(), x.size(0), x.size(1), signs.data_ptr<uint8_t>(),
                     alpha.data_ptr<float>(), signs.size(0), signs.size(1), opt_ptr(bias, "bias"),
                     y.data_ptr<float>(), at::get_num_threads(), simd);
  return y;
}

Tensor int2_linear(const Tensor& x, const Tensor& codes, const Tensor& scale,
                   const OptTensor& offset, int64_t group_size, const OptTensor& bias, bool simd) {
  check(codes, at::kByte, "codes");
  check(scale, at::kFloat, "scale");
  Tensor y = linear_output(x, codes.size(0));
  pwk::int2_linear(x.data_ptr<float>(), x.size(0), x.size(1), codes.data_ptr<uint8_t>(),
                   scale.data_ptr<float>(), opt_ptr(offset, "offset"), group_size, codes.size(0),
                   opt_ptr(bias, "bias"), y.data_ptr<float>(), at::get_num_threads(), simd);
  return y;
}

Tensor vq_linear(const Tensor& x, const Tensor& codes, const Tensor& codebook,
                 const OptTensor& scale, int64_t group_size, const OptTensor& bias, bool simd) {
  check(codes, at::kByte, "codes");
  check(codebook, at::kFloat, "codebook");
  TORCH_CHECK(codebook.numel() == 256 * 4, "codebook must be (256, 4)");
  Tensor y = linear_output(x, codes.size(0));
  pwk::vq_linear(x.data_ptr<float>(), x.size(0), x.size(1), codes.data_ptr<uint8_t>(),
                 codebook.data_ptr<float>(), opt_ptr(scale, "scale"), group_size, codes.size(0),
                 opt_ptr(bias, "bias"), y.data_ptr<float>(), at::get_num_threads(), simd);
  return y;
}

template <typename T>
std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor, int64_t> sinkhorn_typed(
    const Tensor& cost, const Tensor& a, const Tensor& b, double epsilon, int64_t max_iter,
    double tol, int64_t check_every) {
  const auto dtype = cost.scalar_type();
  check(cost, dtype, "cost");
  check(a, dtype, "a");
  check(b, dtype, "b");
  const int64_t batch = cost.size(0), n = cost.size(1), m = cost.size(2);
  Tensor plan = at::empty_like(cost), total = at::empty({batch}, cost.options());
  Tensor f = at::empty_like(a), g = at::empty_like(b), error = at::empty({batch}, cost.options());
  const int64_t done = pwk::sinkhorn<T>(
      cost.data_ptr<T>(), a.data_ptr<T>(), b.data_ptr<T>(), batch, n, m, epsilon, max_iter, tol,
      check_every, plan.data_ptr<T>(), total.data_ptr<T>(), f.data_ptr<T>(), g.data_ptr<T>(),
      error.data_ptr<T>(), at::get_num_threads());
  return {plan, total, f, g, error, done};
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor, int64_t> sinkhorn(
    const Tensor& cost, const Tensor& a, const Tensor& b, double epsilon, int64_t max_iter,
    double tol, int64_t check_every) {
  TORCH_CHECK(cost.dim() == 3, "cost must be (B, n, m)");
  if (cost.scalar_type() == at::kDouble)
    return sinkhorn_typed<double>(cost, a, b, epsilon, max_iter, tol, check_every);
  return sinkhorn_typed<float>(cost, a, b, epsilon, max_iter, tol, check_every);
}

std::vector<Tensor> grid_contract(const Tensor& image, const Tensor& weights, double threshold) {
  check(image, at::kFloat, "image");
  check(weights, at::kFloat, "weights");
  TORCH_CHECK(image.dim() == 3 && weights.dim() == 4 && weights.size(0) == 3,
              "image must be (D, H, W) and weights (3, D, H, W)");
  const auto i64 = image.options().dtype(at::kLong), f64 = image.options().dtype(at::kDouble);
  Tensor labels = at::empty(image.sizes(), i64);
  std::vector<Tensor> out;
  auto allocate = [&](int64_t regions, int64_t edges) {
    out = {labels,
           at::empty({regions}, i64),
           at::empty({regions}, f64),
           at::empty({regions}, f64),
           at::empty({edges, 2}, i64),
           at::empty({edges}, i64),
           at::empty({edges}, f64)};
    return pwk::GridBuffers{out[1].data_ptr<int64_t>(), out[2].data_ptr<double>(),
                            out[3].data_ptr<double>(),  out[4].data_ptr<int64_t>(),
                            out[5].data_ptr<int64_t>(), out[6].data_ptr<double>()};
  };
  pwk::grid_contract(image.data_ptr<float>(), weights.data_ptr<float>(), image.size(0),
                     image.size(1), image.size(2), static_cast<float>(threshold),
                     labels.data_ptr<int64_t>(), allocate, at::get_num_threads());
  return out;
}

}  // namespace

TORCH_LIBRARY(paperworks_cpu, m) {
  m.def("binary_linear", &binary_linear);
  m.def("int2_linear", &int2_linear);
  m.def("vq_linear", &vq_linear);
  m.def("sinkhorn", &sinkhorn);
  m.def("grid_contract", &grid_contract);
}
