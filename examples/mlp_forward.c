/* The forward pass of examples/mlp_forward.cpp in C, through pthload's C API: the same weights of
 * Linear(16, 32) -> ReLU -> Linear(32, 32) -> Tanh -> Linear(32, 8), read with
 * pthload_checkpoint_find_tensor and each tensor's data pointer and strides, computed in double and
 * compared with torch's float64 output.
 *
 *   mlp_forward_c mlp.pt mlp_io.pt    exit 0 when every output is within 1e-6 relative of torch's
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pthload/pthload.h"

#define MAX_ROWS 64
#define MAX_COLS 64

/* A vector or matrix of at most MAX_ROWS x MAX_COLS values as doubles. */
typedef struct matrix {
  int64_t rows, cols;
  double values[MAX_ROWS * MAX_COLS];
} matrix;

/* Prints what failed (pthload's message, or a shape/dtype this program does not expect); 0. */
static int fail(const char* what) {
  const pthload_error* error = pthload_last_error();
  fprintf(stderr, "mlp_forward_c: %s: %s\n", what,
          error->code ? error->what : "not a float32/float64 vector or small matrix");
  return 0;
}

/* Reads tensor `name` of `checkpoint` (float32 or float64, 1-D or 2-D) through its strides. */
static int read_matrix(const pthload_checkpoint* checkpoint, const char* name, matrix* out) {
  const pthload_tensor* tensor = NULL;
  if (pthload_checkpoint_find_tensor(checkpoint, name, &tensor) != PTHLOAD_OK) return fail(name);
  const size_t ndim = pthload_tensor_ndim(tensor);
  const int64_t* shape = pthload_tensor_shape(tensor);
  const int64_t* strides = pthload_tensor_strides(tensor);
  const pthload_dtype dtype = pthload_tensor_dtype(tensor);
  const unsigned char* data = pthload_tensor_data(tensor);
  if (data == NULL) return fail(name);
  if ((ndim != 1 && ndim != 2) || (dtype != PTHLOAD_FLOAT32 && dtype != PTHLOAD_FLOAT64)) {
    return fail(name);
  }
  out->rows = ndim == 2 ? shape[0] : 1;
  out->cols = shape[ndim - 1];
  if (out->rows > MAX_ROWS || out->cols > MAX_COLS) return fail(name);
  const int64_t row_stride = ndim == 2 ? strides[0] : 0;
  const int64_t col_stride = strides[ndim - 1];
  for (int64_t r = 0; r < out->rows; ++r) {
    for (int64_t c = 0; c < out->cols; ++c) {
      const int64_t at = r * row_stride + c * col_stride;
      double value;
      if (dtype == PTHLOAD_FLOAT32) {
        float f;
        memcpy(&f, data + at * 4, 4);
        value = f;
      } else {
        memcpy(&value, data + at * 8, 8);
      }
      out->values[r * out->cols + c] = value;
    }
  }
  return 1;
}

/* y = x W^T + b, then the activation: 0 none, 1 ReLU, 2 tanh. */
static void linear(const matrix* x, const matrix* weight, const matrix* bias, int activation,
                   matrix* y) {
  y->rows = x->rows;
  y->cols = weight->rows;
  for (int64_t i = 0; i < x->rows; ++i) {
    for (int64_t o = 0; o < weight->rows; ++o) {
      double sum = bias->values[o];
      for (int64_t k = 0; k < x->cols; ++k) {
        sum += x->values[i * x->cols + k] * weight->values[o * weight->cols + k];
      }
      if (activation == 1 && sum < 0) sum = 0;
      if (activation == 2) sum = tanh(sum);
      y->values[i * y->cols + o] = sum;
    }
  }
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: mlp_forward_c MLP_STATE_DICT MLP_IO\n");
    return 2;
  }
  pthload_options options;
  pthload_options_init(&options);
  options.map_to = "cpu";
  pthload_checkpoint* weights = NULL;
  pthload_checkpoint* io = NULL;
  if (pthload_load(argv[1], &options, &weights) != PTHLOAD_OK) return fail(argv[1]) + 1;
  if (pthload_load(argv[2], &options, &io) != PTHLOAD_OK) return fail(argv[2]) + 1;

  static matrix w[3], b[3], x, h1, h2, y, expected;
  const char* const names[3][2] = {
      {"0.weight", "0.bias"}, {"2.weight", "2.bias"}, {"4.weight", "4.bias"}};
  int ok = read_matrix(io, "input", &x) && read_matrix(io, "output", &expected);
  for (int i = 0; i < 3 && ok; ++i) {
    ok = read_matrix(weights, names[i][0], &w[i]) && read_matrix(weights, names[i][1], &b[i]);
  }
  pthload_checkpoint_free(weights);
  pthload_checkpoint_free(io);
  if (!ok) return 1;

  linear(&x, &w[0], &b[0], 1, &h1);
  linear(&h1, &w[1], &b[1], 2, &h2);
  linear(&h2, &w[2], &b[2], 0, &y);
  if (y.rows != expected.rows || y.cols != expected.cols) return fail("output") + 1;
  double worst = 0;
  for (int64_t i = 0; i < y.rows * y.cols; ++i) {
    const double relative = fabs(y.values[i] - expected.values[i]) / fabs(expected.values[i]);
    if (!(relative <= worst)) worst = relative; /* NaN sticks */
  }
  printf("mlp_forward_c: %ldx%ld outputs, max relative difference from torch %.3g\n", (long)y.rows,
         (long)y.cols, worst);
  return worst <= 1e-6 ? 0 : 1;
}
