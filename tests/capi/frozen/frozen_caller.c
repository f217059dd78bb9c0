/* A program built against a frozen copy of an earlier pthload.h (tests/capi/frozen/<version>/),
 * run against the library being built: what a program linked years ago does when the library
 * under it is upgraded without a rebuild. Every struct that crosses the API is exercised at the
 * frozen header's size: options in, record info filled, storage info and errors handed out.
 *
 *   frozen_caller CHECKPOINT.pt
 *
 * CHECKPOINT is a torch zip file with at least one tensor. Exit status 0 when every check holds;
 * else 1, after saying which failed. */
#include <stdio.h>
#include <string.h>

#include "pthload/pthload.h"

#define CHECK(condition)                                                                         \
  do {                                                                                           \
    if (!(condition)) {                                                                          \
      fprintf(stderr, "%s:%d: failed: %s (last error %d: %s)\n", __FILE__, __LINE__, #condition, \
              pthload_last_error()->code, pthload_last_error()->what);                           \
      return 1;                                                                                  \
    }                                                                                            \
  } while (0)

static int storages_seen = 0;

/* Reads only what the frozen header's pthload_storage_info holds. */
static int count_storage(void* user_data, const pthload_storage_info* storage,
                         pthload_device* device) {
  (void)user_data;
  (void)device;
  if (!PTHLOAD_HAS_FIELD(storage, pthload_storage_info, nbytes) || storage->key == NULL) {
    return -1;
  }
  ++storages_seen;
  return 0; /* where its tag says */
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: frozen_caller CHECKPOINT.pt\n");
    return 2;
  }
  const char* path = argv[1];

  /* The library is this header's version or a later one of the same soname. */
  int major = -1, minor = -1, patch = -1;
  CHECK(sscanf(pthload_version(), "%d.%d.%d", &major, &minor, &patch) == 3);
  CHECK(major > PTHLOAD_VERSION_MAJOR ||
        (major == PTHLOAD_VERSION_MAJOR &&
         (minor > PTHLOAD_VERSION_MINOR ||
          (minor == PTHLOAD_VERSION_MINOR && patch >= PTHLOAD_VERSION_PATCH))));
  printf("header %s, library %s\n", PTHLOAD_VERSION_STRING, pthload_version());

  /* Options at this header's size: loads, with a callback and a choice of tensors. */
  pthload_options options;
  pthload_options_init(&options);
  CHECK(options.struct_size == sizeof(pthload_options));
  options.map_location = count_storage;
  options.verify_crc = 1;
  pthload_checkpoint* checkpoint = NULL;
  CHECK(pthload_load(path, &options, &checkpoint) == PTHLOAD_OK);
  const size_t count = pthload_checkpoint_tensor_count(checkpoint);
  CHECK(count > 0);
  CHECK(storages_seen > 0);
  const pthload_tensor* first = pthload_checkpoint_tensor(checkpoint, 0);
  uint64_t checksum = 0;
  CHECK(pthload_tensor_checksum(first, &checksum) == PTHLOAD_OK);
  const pthload_tensor* found = NULL;
  CHECK(pthload_checkpoint_find_tensor(checkpoint, pthload_tensor_name(first), &found) ==
        PTHLOAD_OK);
  CHECK(found == first);
  pthload_checkpoint_free(checkpoint);

  const char* everything[] = {"*"};
  options.map_location = NULL;
  options.exclude = everything;
  options.exclude_count = 1;
  CHECK(pthload_open(path, &options, &checkpoint) == PTHLOAD_OK);
  CHECK(pthload_checkpoint_tensor_count(checkpoint) == 0);
  pthload_checkpoint_free(checkpoint);

  /* A record info at this header's size is filled; struct_size says how far. */
  pthload_records* records = NULL;
  CHECK(pthload_records_open(path, NULL, &records) == PTHLOAD_OK);
  CHECK(pthload_records_count(records) > 0);
  pthload_record_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  CHECK(pthload_records_info(records, 0, &info) == PTHLOAD_OK);
  CHECK(info.struct_size <= sizeof info);
  CHECK(PTHLOAD_HAS_FIELD(&info, pthload_record_info, is_compressed));
  CHECK(info.name != NULL && strchr(info.name, '/') != NULL);
  size_t index = 99;
  CHECK(pthload_records_find(records, info.name, &index) == PTHLOAD_OK && index == 0);
  pthload_records_free(records);

  /* An error at least as large as this header's, with its fields where this header has them. */
  static const char not_a_checkpoint[] = "hello, world";
  CHECK(pthload_open_bytes(not_a_checkpoint, sizeof not_a_checkpoint, NULL, &checkpoint) != 0);
  CHECK(checkpoint == NULL);
  const pthload_error* error = pthload_last_error();
  CHECK(PTHLOAD_HAS_FIELD(error, pthload_error, opcode));
  CHECK(error->has_offset == 1 && error->offset == 0);
  CHECK(strcmp(error->path, "<memory>") == 0);

  printf("frozen caller: every check held\n");
  return 0;
}
