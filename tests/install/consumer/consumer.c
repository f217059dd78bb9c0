/* A C program outside pthload's tree, built against an installed pthload through pthload.h.
 * Prints "<tensors> <name of the first> <the sum of its floats>"; exit 1 on error. */
#include <stdio.h>
#include <string.h>

#include <pthload/pthload.h>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  pthload_checkpoint* checkpoint = NULL;
  if (pthload_load(argv[1], NULL, &checkpoint) != PTHLOAD_OK) {
    fprintf(stderr, "consumer_c: %s\n", pthload_last_error()->what);
    return 1;
  }
  const pthload_tensor* first = pthload_checkpoint_tensor(checkpoint, 0);
  const unsigned char* data = pthload_tensor_data(first); /* a contiguous float32 tensor */
  double sum = 0;
  for (uint64_t i = 0; data != NULL && i < pthload_tensor_numel(first); ++i) {
    float value;
    memcpy(&value, data + i * sizeof value, sizeof value);
    sum += value;
  }
  printf("%zu %s %g\n", pthload_checkpoint_tensor_count(checkpoint), pthload_tensor_name(first),
         sum);
  pthload_checkpoint_free(checkpoint);
  return 0;
}
