/* Lists a checkpoint's tensors from C through pthload's C API: name, dtype, shape, and the XXH3-64
 * of each tensor's elements (as pthinspect ls --checksum prints it). Every storage goes to the CPU.
 *
 *   list_tensors model.pt
 *
 * Prints one line per tensor, tab-separated: name, dtype, shape ("3,4"; "" for a scalar), xxh3
 * (16 hex digits, or "-" for a tensor without bytes: meta, sparse). Exit status 1 on an error,
 * with pthload's message, file, record and offset on stderr. */
#include <inttypes.h>
#include <stdio.h>

#include "pthload/pthload.h"

static int fail(const char* what) {
  const pthload_error* error = pthload_last_error();
  fprintf(stderr, "list_tensors: %s: %s (code %d, %s)\n", what, error->what, error->code,
          error->code_name);
  return 1;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: list_tensors CHECKPOINT\n");
    return 2;
  }
  pthload_options options;
  pthload_options_init(&options);
  options.map_to = "cpu";
  pthload_checkpoint* checkpoint = NULL;
  if (pthload_load(argv[1], &options, &checkpoint) != PTHLOAD_OK) return fail("cannot load");

  const size_t count = pthload_checkpoint_tensor_count(checkpoint);
  for (size_t i = 0; i < count; ++i) {
    const pthload_tensor* tensor = pthload_checkpoint_tensor(checkpoint, i);
    printf("%s\t%s\t", pthload_tensor_name(tensor),
           pthload_dtype_name(pthload_tensor_dtype(tensor)));
    const int64_t* shape = pthload_tensor_shape(tensor);
    for (size_t d = 0; d < pthload_tensor_ndim(tensor); ++d) {
      printf("%s%" PRId64, d == 0 ? "" : ",", shape[d]);
    }
    uint64_t checksum = 0;
    if (pthload_tensor_layout(tensor) == PTHLOAD_LAYOUT_STRIDED &&
        pthload_tensor_device(tensor).type == PTHLOAD_DEVICE_CPU &&
        pthload_tensor_checksum(tensor, &checksum) == PTHLOAD_OK) {
      printf("\t%016" PRIx64 "\n", checksum);
    } else {
      printf("\t-\n");
    }
  }
  pthload_checkpoint_free(checkpoint);
  return 0;
}
