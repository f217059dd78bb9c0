// A torch-saved MLP's forward pass with plain loops over pthload's tensors: the weights of
// Linear(16, 32) -> ReLU -> Linear(32, 32) -> Tanh -> Linear(32, 8) from a state_dict, its input
// and torch's own output from a second file (tests/fixtures/make_mlp_fixture.py). Computes in
// float64 and compares with torch's float64 forward pass over the same float32 weights.
//
//   mlp_forward mlp.pt mlp_io.pt      exit 0 when every output is within 1e-6 relative of torch's
#include <pthload/pthload.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <vector>

namespace {

// A 1-D or 2-D float32/float64 tensor as float64 values, row-major, reading through its strides.
struct Matrix {
  std::int64_t rows = 1;
  std::int64_t cols = 0;
  std::vector<double> values;
  double operator()(std::int64_t r, std::int64_t c) const { return values[r * cols + c]; }
};

Matrix to_matrix(const pthload::Tensor& tensor) {
  const auto sizes = tensor.sizes();
  const auto strides = tensor.strides();
  if (sizes.size() != 1 && sizes.size() != 2) throw std::runtime_error("not a vector or matrix");
  Matrix m;
  m.rows = sizes.size() == 2 ? sizes[0] : 1;
  m.cols = sizes.back();
  const std::int64_t row_stride = sizes.size() == 2 ? strides[0] : 0;
  const std::int64_t col_stride = strides.back();
  const std::byte* data = tensor.data();  // the first element, on the CPU
  for (std::int64_t r = 0; r < m.rows; ++r) {
    for (std::int64_t c = 0; c < m.cols; ++c) {
      const std::int64_t at = r * row_stride + c * col_stride;
      if (tensor.dtype() == pthload::Dtype::kFloat32) {
        float value;
        std::memcpy(&value, data + at * 4, 4);
        m.values.push_back(value);
      } else if (tensor.dtype() == pthload::Dtype::kFloat64) {
        double value;
        std::memcpy(&value, data + at * 8, 8);
        m.values.push_back(value);
      } else {
        throw std::runtime_error("expected float32 or float64");
      }
    }
  }
  return m;
}

// y = x W^T + b, as torch.nn.Linear.
Matrix linear(const Matrix& x, const Matrix& weight, const Matrix& bias) {
  Matrix y{x.rows, weight.rows, std::vector<double>(x.rows * weight.rows)};
  for (std::int64_t i = 0; i < x.rows; ++i) {
    for (std::int64_t o = 0; o < weight.rows; ++o) {
      double sum = bias(0, o);
      for (std::int64_t k = 0; k < x.cols; ++k)
        sum += x(i, k) * weight(o, k);
      y.values[i * y.cols + o] = sum;
    }
  }
  return y;
}

template <typename Function>
Matrix apply(Matrix m, Function f) {
  for (double& v : m.values)
    v = f(v);
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: mlp_forward MLP_STATE_DICT MLP_IO\n");
    return 2;
  }
  try {
    const auto cpu = pthload::LoadOptions{.map_location = pthload::map_to("cpu")};
    const pthload::Checkpoint weights = pthload::load(argv[1], cpu);
    const pthload::Checkpoint io = pthload::load(argv[2], cpu);
    const auto layer = [&](const char* name) { return to_matrix(weights.tensor(name)); };

    Matrix h = linear(to_matrix(io.tensor("input")), layer("0.weight"), layer("0.bias"));
    h = apply(h, [](double v) { return v > 0 ? v : 0.0; });
    h = apply(linear(h, layer("2.weight"), layer("2.bias")), [](double v) { return std::tanh(v); });
    const Matrix y = linear(h, layer("4.weight"), layer("4.bias"));

    const Matrix expected = to_matrix(io.tensor("output"));
    if (expected.rows != y.rows || expected.cols != y.cols) {
      std::fprintf(stderr, "mlp_forward: output is %ldx%ld, torch's %ldx%ld\n",
                   static_cast<long>(y.rows), static_cast<long>(y.cols),
                   static_cast<long>(expected.rows), static_cast<long>(expected.cols));
      return 1;
    }
    double worst = 0;
    for (std::size_t i = 0; i < y.values.size(); ++i) {
      const double relative =
          std::abs(y.values[i] - expected.values[i]) / std::abs(expected.values[i]);
      if (!(relative <= worst)) worst = relative;  // NaN sticks
    }
    std::printf("mlp_forward: %ldx%ld outputs, max relative difference from torch %.3g\n",
                static_cast<long>(y.rows), static_cast<long>(y.cols), worst);
    return worst <= 1e-6 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mlp_forward: %s\n", e.what());
    return 1;
  }
}
