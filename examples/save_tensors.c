/* Saves two tensors from the program's own memory as a torch.save file through pthload's C API,
 * then loads the file back and checks every name, dtype, shape and byte. torch.load reads the
 * file as it reads torch.save's own (a dict of the two tensors).
 *
 *   save_tensors OUT.pt
 *
 * Prints one line per tensor read back, tab-separated as list_tensors prints them: name, dtype,
 * shape ("2,3"), xxh3 (16 hex digits). Exit status 1 on an error, with pthload's message on
 * stderr, or when what was read back differs from what was saved. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "pthload/pthload.h"

static int fail(const char* what) {
  const pthload_error* error = pthload_last_error();
  fprintf(stderr, "save_tensors: %s: %s (code %d, %s)\n", what, error->what, error->code,
          error->code_name);
  return 1;
}

/* Called as the file is written: a caller would draw a progress bar here. */
static int progress(void* user_data, uint64_t written, uint64_t total) {
  *(uint64_t*)user_data = total;
  (void)written;
  return 0; /* a negative value would stop the save */
}

int main(int argc, char** argv) {
  /* The caller's memory: a 2x3 float32 matrix and an int64 vector. */
  static const float weight[6] = {0.5f, -1.0f, 2.25f, 3.0f, -4.5f, 6.0f};
  static const int64_t steps[4] = {1, 10, 100, -1000};
  static const int64_t weight_sizes[2] = {2, 3};
  static const int64_t steps_sizes[1] = {4};
  pthload_save_tensor tensors[2];
  pthload_save_options options;
  pthload_checkpoint* checkpoint = NULL;
  uint64_t file_size = 0;
  size_t i;
  size_t d;
  int status = 0;

  if (argc != 2) {
    fprintf(stderr, "usage: save_tensors OUT.pt\n");
    return 2;
  }
  pthload_save_tensor_init(&tensors[0]);
  pthload_save_tensor_init(&tensors[1]);
  tensors[0].name = "layer.weight";
  tensors[0].dtype = PTHLOAD_FLOAT32;
  tensors[0].ndim = 2;
  tensors[0].sizes = weight_sizes;
  tensors[0].strides = NULL; /* contiguous */
  tensors[0].storage = weight;
  tensors[0].storage_nbytes = sizeof weight;
  tensors[0].requires_grad = 1;
  tensors[1].name = "steps";
  tensors[1].dtype = PTHLOAD_INT64;
  tensors[1].ndim = 1;
  tensors[1].sizes = steps_sizes;
  tensors[1].storage = steps;
  tensors[1].storage_nbytes = sizeof steps;

  pthload_save_options_init(&options);
  options.progress = progress;
  options.progress_user_data = &file_size;
  if (pthload_save(argv[1], tensors, 2, &options) != PTHLOAD_OK) return fail("cannot save");

  /* Read it back onto the CPU: every name, dtype, shape and byte must be what was saved. */
  {
    pthload_options load_options;
    pthload_options_init(&load_options);
    load_options.map_to = "cpu";
    if (pthload_load(argv[1], &load_options, &checkpoint) != PTHLOAD_OK)
      return fail("cannot load what was saved");
  }
  if (pthload_checkpoint_tensor_count(checkpoint) != 2) {
    fprintf(stderr, "save_tensors: %s holds %zu tensors, not 2\n", argv[1],
            pthload_checkpoint_tensor_count(checkpoint));
    status = 1;
  }
  for (i = 0; i < 2 && status == 0; ++i) {
    const pthload_tensor* tensor = NULL;
    const pthload_save_tensor* saved = &tensors[i];
    uint64_t checksum = 0;
    if (pthload_checkpoint_find_tensor(checkpoint, saved->name, &tensor) != PTHLOAD_OK) {
      status = fail("a saved tensor is missing");
      break;
    }
    if (pthload_tensor_dtype(tensor) != saved->dtype ||
        pthload_tensor_ndim(tensor) != saved->ndim ||
        memcmp(pthload_tensor_shape(tensor), saved->sizes, saved->ndim * sizeof(int64_t)) != 0 ||
        pthload_tensor_nbytes(tensor) != saved->storage_nbytes ||
        memcmp(pthload_tensor_data(tensor), saved->storage, (size_t)saved->storage_nbytes) != 0) {
      fprintf(stderr, "save_tensors: '%s' read back differs from what was saved\n", saved->name);
      status = 1;
      break;
    }
    if (pthload_tensor_checksum(tensor, &checksum) != PTHLOAD_OK) {
      status = fail("cannot hash a tensor read back");
      break;
    }
    printf("%s\t%s\t", pthload_tensor_name(tensor),
           pthload_dtype_name(pthload_tensor_dtype(tensor)));
    for (d = 0; d < pthload_tensor_ndim(tensor); ++d) {
      printf("%s%" PRId64, d == 0 ? "" : ",", pthload_tensor_shape(tensor)[d]);
    }
    printf("\t%016" PRIx64 "\n", checksum);
  }
  pthload_checkpoint_free(checkpoint);
  if (status == 0) fprintf(stderr, "save_tensors: wrote %" PRIu64 " bytes\n", file_size);
  return status;
}
