// The C API (pthload.h) over the public C++ API: every entry point catches everything and turns
// it into an Errc code plus this thread's last error, so no exception crosses into C.
#include "pthload/pthload.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <exception>
#include <filesystem>
#include <functional>
#include <limits>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "pthload/checkpoint.hpp"
#include "pthload/dlpack.hpp"
#include "pthload/dtype.hpp"
#include "pthload/error.hpp"
#include "pthload/options.hpp"
#include "pthload/records.hpp"
#include "pthload/save.hpp"
#include "pthload/tensor.hpp"

struct pthload_checkpoint {
  pthload::Checkpoint checkpoint;
};

struct pthload_records {
  pthload::RecordReader reader;
};

namespace {

using pthload::Errc;

// The C enums mirror the C++ ones value for value, so conversions are casts.
static_assert(PTHLOAD_FLOAT64 == static_cast<int>(pthload::Dtype::kFloat64));
static_assert(PTHLOAD_BOOL == static_cast<int>(pthload::Dtype::kBool));
static_assert(PTHLOAD_QINT8 == static_cast<int>(pthload::Dtype::kQInt8));
static_assert(PTHLOAD_FLOAT8_E5M2 == static_cast<int>(pthload::Dtype::kFloat8E5M2));
static_assert(PTHLOAD_BITS4X2 == static_cast<int>(pthload::Dtype::kBits4x2));
static_assert(PTHLOAD_DEVICE_CPU == static_cast<int>(pthload::Device::Type::kCpu));
static_assert(PTHLOAD_DEVICE_CUDA == static_cast<int>(pthload::Device::Type::kCuda));
static_assert(PTHLOAD_DEVICE_META == static_cast<int>(pthload::Device::Type::kMeta));
static_assert(PTHLOAD_LAYOUT_SPARSE_COO == static_cast<int>(pthload::Layout::kSparseCoo));
static_assert(PTHLOAD_LAYOUT_NESTED == static_cast<int>(pthload::Layout::kNested));
static_assert(PTHLOAD_ERROR_INVALID_ARGUMENT == static_cast<int>(Errc::kCapiInvalidArgument));
static_assert(PTHLOAD_ERROR_OUT_OF_MEMORY == static_cast<int>(Errc::kCapiOutOfMemory));
static_assert(PTHLOAD_ERROR_INTERNAL == static_cast<int>(Errc::kCapiInternal));
static_assert(PTHLOAD_ERROR_CALLBACK_FAILED == static_cast<int>(Errc::kCapiCallbackFailed));
static_assert(PTHLOAD_ERROR_NO_DLPACK_FORM == static_cast<int>(Errc::kDlpackUnsupportedTensor));
static_assert(PTHLOAD_ERROR_UNSUPPORTED_OPTION == static_cast<int>(Errc::kCapiUnsupportedOption));

// The first versions of the structs that grow (pthload.h, "Compatibility"): the library reads
// `struct_size` before anything else, so it must stay their first field.
static_assert(offsetof(pthload_options, struct_size) == 0 &&
              offsetof(pthload_record_info, struct_size) == 0 &&
              offsetof(pthload_storage_info, struct_size) == 0 &&
              offsetof(pthload_error, struct_size) == 0 &&
              offsetof(pthload_save_tensor, struct_size) == 0 &&
              offsetof(pthload_save_options, struct_size) == 0);

// What this library knows of each: the end of the last field of the newest version. Not sizeof,
// which counts tail padding where a later version may put a field (pthload.h, "Compatibility").
constexpr std::size_t kOptionsKnown = PTHLOAD_OPTIONS_SIZE_V2;
constexpr std::size_t kRecordInfoKnown = PTHLOAD_RECORD_INFO_SIZE_V1;
constexpr std::size_t kStorageInfoKnown = PTHLOAD_STORAGE_INFO_SIZE_V1;
constexpr std::size_t kErrorKnown = PTHLOAD_ERROR_SIZE_V1;
constexpr std::size_t kSaveTensorKnown = PTHLOAD_SAVE_TENSOR_SIZE_V1;
constexpr std::size_t kSaveOptionsKnown = PTHLOAD_SAVE_OPTIONS_SIZE_V1;
static_assert(kOptionsKnown <= sizeof(pthload_options) &&
              kRecordInfoKnown <= sizeof(pthload_record_info) &&
              kStorageInfoKnown <= sizeof(pthload_storage_info) &&
              kErrorKnown <= sizeof(pthload_error) &&
              kSaveTensorKnown <= sizeof(pthload_save_tensor) &&
              kSaveOptionsKnown <= sizeof(pthload_save_options));

constexpr pthload_error kNoError{.struct_size = kErrorKnown,
                                 .code = PTHLOAD_OK,
                                 .code_name = "Ok",
                                 .message = "",
                                 .what = "",
                                 .path = "",
                                 .record = "",
                                 .has_offset = 0,
                                 .offset = 0,
                                 .has_opcode = 0,
                                 .opcode = 0};

// The strings pthload_error points into, per thread.
struct LastError {
  pthload_error view = kNoError;
  std::string message;
  std::string what;
  std::string path;
  std::string record;
};
thread_local LastError last_error;

void clear_last_error() noexcept {
  last_error.view = kNoError;
}

// Recording an error may itself run out of memory: then the code survives with a fixed text.
int record_error(Errc code, const char* message, const pthload::ErrorContext* context) noexcept {
  auto& view = last_error.view;
  view.code = static_cast<int>(code);
  view.code_name = pthload::errc_name(code).data();  // static, NUL-terminated literals
  view.has_offset = context != nullptr && context->offset.has_value();
  view.offset = view.has_offset ? *context->offset : 0;
  view.has_opcode = context != nullptr && context->opcode.has_value();
  view.opcode = view.has_opcode ? *context->opcode : 0;
  try {
    last_error.message = message;
    last_error.path = context != nullptr ? context->path : std::string();
    last_error.record = context != nullptr ? context->record : std::string();
    view.message = last_error.message.c_str();
    view.path = last_error.path.c_str();
    view.record = last_error.record.c_str();
  } catch (...) {
    view.message = "out of memory while recording an error";
    view.path = "";
    view.record = "";
  }
  return view.code;
}

int record_error(const pthload::Error& error) noexcept {
  record_error(error.code(), error.message().c_str(), &error.context());
  try {
    last_error.what = error.what();
    last_error.view.what = last_error.what.c_str();
  } catch (...) {
    last_error.view.what = last_error.view.message;
  }
  return last_error.view.code;
}

int record_simple_error(Errc code, const char* message) noexcept {
  record_error(code, message, nullptr);
  last_error.view.what = last_error.view.message;
  return last_error.view.code;
}

// Runs `body` with every exception turned into a code, which the thread's last error then
// describes; a success leaves the last error (and its strings) as they were.
template <typename Body>
int recorded(Body&& body) noexcept {
  try {
    body();
    return PTHLOAD_OK;
  } catch (const pthload::Error& error) {
    return record_error(error);
  } catch (const std::bad_alloc&) {
    return record_simple_error(Errc::kCapiOutOfMemory, "out of memory");
  } catch (const std::exception& error) {
    std::string text = "unexpected exception (a bug in pthload): ";
    try {
      text += error.what();
    } catch (...) {
    }
    return record_simple_error(Errc::kCapiInternal, text.c_str());
  } catch (...) {
    return record_simple_error(Errc::kCapiInternal,
                               "unexpected exception of unknown type (a bug in pthload)");
  }
}

// The same for the functions returning int, whose success resets the last error to code 0.
template <typename Body>
int guarded(Body&& body) noexcept {
  const int code = recorded(std::forward<Body>(body));
  if (code == PTHLOAD_OK) clear_last_error();
  return code;
}

[[noreturn]] void throw_invalid_argument(const std::string& what) {
  throw pthload::Error(Errc::kCapiInvalidArgument, what);
}

const pthload::NamedTensor& named(const pthload_tensor* tensor) noexcept {
  return *reinterpret_cast<const pthload::NamedTensor*>(tensor);
}

const pthload_tensor* handle(const pthload::NamedTensor& tensor) noexcept {
  return reinterpret_cast<const pthload_tensor*>(&tensor);
}

pthload::MapLocation c_map_location(pthload_map_location_fn function, void* user_data) {
  return [function, user_data](const pthload::StorageInfo& storage,
                               std::string_view location) -> std::optional<pthload::Device> {
    const std::string key(storage.key);
    const std::string tag(location);
    const pthload_storage_info info{.struct_size = kStorageInfoKnown,
                                    .key = key.c_str(),
                                    .location = tag.c_str(),
                                    .dtype = static_cast<pthload_dtype>(storage.dtype),
                                    .numel = storage.numel,
                                    .nbytes = storage.nbytes};
    pthload_device device{PTHLOAD_DEVICE_CPU, -1};
    const int chosen = function(user_data, &info, &device);
    if (chosen < 0) {
      throw pthload::Error(Errc::kCapiCallbackFailed,
                           "the map_location callback returned " + std::to_string(chosen) +
                               " for storage '" + key + "' (tagged '" + tag + "')");
    }
    if (chosen == 0) return std::nullopt;
    // Read as its bytes: C lets the callback store any int there, and loading a value outside
    // the enumerators as the C++ enum would be undefined.
    int type = 0;
    static_assert(sizeof type == sizeof device.type);
    std::memcpy(&type, &device.type, sizeof type);
    switch (type) {
      case PTHLOAD_DEVICE_CPU:
        return pthload::Device::cpu();
      case PTHLOAD_DEVICE_CUDA:
        return pthload::Device::cuda(device.index);
      case PTHLOAD_DEVICE_META:
        return pthload::Device::meta();
      default:
        break;
    }
    throw_invalid_argument("the map_location callback chose device type " + std::to_string(type) +
                           " for storage '" + key + "', which is no pthload_device_type");
  };
}

// `count` C strings at `strings` (globs), checked: none may be NULL.
std::vector<std::string> c_strings(const char* const* strings, std::size_t count,
                                   const char* field) {
  // Checked before anything is reserved for `count`, which a caller may have left unset.
  if (count != 0 && strings == nullptr) {
    throw_invalid_argument(std::string(field) + "_count is " + std::to_string(count) + " but " +
                           field + " is NULL");
  }
  std::vector<std::string> result;
  for (std::size_t i = 0; i < count; ++i) {
    if (strings[i] == nullptr) {
      throw_invalid_argument(std::string(field) + "_count is " + std::to_string(count) + " but " +
                             field + " or one of its strings is NULL");
    }
    result.emplace_back(strings[i]);
  }
  return result;
}

constexpr const char* kOptionsSetUpBy = "set the struct up with pthload_options_init";

// The defaults, as this library's struct, padding zeroed: init_sized hands its bytes to callers,
// whose bytes past a library's fields a newer library reads as options.
pthload_options default_options() noexcept {
  const pthload::Limits limits;
  pthload_options options;
  std::memset(static_cast<void*>(&options), 0, sizeof options);
  options.struct_size = kOptionsKnown;
  options.max_zip_entries = limits.max_zip_entries;
  options.max_inflated_record_bytes = limits.max_inflated_record_bytes;
  options.max_pickle_stack = limits.max_pickle_stack;
  options.max_pickle_memo = limits.max_pickle_memo;
  options.max_pickle_nesting = limits.max_pickle_nesting;
  options.max_pickle_values = limits.max_pickle_values;
  return options;  // the pointers NULL, the flags and counts 0
}

// The caller's struct_size, read as bytes: the struct may be of another header's layout.
std::size_t declared_size(const void* sized_struct) noexcept {
  std::size_t size = 0;
  std::memcpy(&size, sized_struct, sizeof size);
  return size;
}

// A caller's struct_size, checked before anything past the struct's first field is read or
// written: at least the first version's (else a struct never set up) and at most
// PTHLOAD_STRUCT_SIZE_MAX (else garbage, which must not send the library that far).
std::size_t check_struct_size(std::size_t size, std::size_t first_version, const char* type,
                              const char* set_up_by) {
  if (size < first_version || size > PTHLOAD_STRUCT_SIZE_MAX) {
    throw_invalid_argument(std::string(type) + ".struct_size is " + std::to_string(size) +
                           ", where a " + type + " holds " + std::to_string(first_version) +
                           " to " + std::to_string(PTHLOAD_STRUCT_SIZE_MAX) +
                           " bytes: " + set_up_by);
  }
  return size;
}

// What a newer caller's struct holds past this library's `known` bytes must be zero (options
// left at their defaults), or the call fails rather than ignore an option (pthload.h,
// "Compatibility"). `type` names the struct in the message ("pthload_options").
void refuse_unknown_fields(const void* caller_struct, std::size_t size, std::size_t known,
                           const std::string& type) {
  const auto* bytes = static_cast<const unsigned char*>(caller_struct);
  for (std::size_t at = known; at < size; ++at) {
    if (bytes[at] != 0) {
      pthload::ErrorContext where;
      where.offset = at;
      throw pthload::Error(Errc::kCapiUnsupportedOption,
                           type + " (" + std::to_string(size) +
                               " bytes, from a newer pthload.h) sets byte " + std::to_string(at) +
                               ", past the " + std::to_string(known) +
                               " bytes this library (pthload " + PTHLOAD_VERSION_STRING +
                               ") knows: an option it cannot honour",
                           std::move(where));
    }
  }
}

// The caller's options as this library's struct (pthload.h, "Compatibility"): what an older
// caller's struct lacks takes the defaults; what a newer caller's holds past this library's must
// be zero (options left at their defaults), or the call fails rather than ignore an option.
pthload_options read_options(const pthload_options* options) {
  pthload_options result = default_options();
  if (options == nullptr) return result;
  const std::size_t size = check_struct_size(declared_size(options), PTHLOAD_OPTIONS_SIZE_V1,
                                             "pthload_options", kOptionsSetUpBy);
  refuse_unknown_fields(options, size, kOptionsKnown, "pthload_options");
  std::memcpy(static_cast<void*>(&result), options, std::min(size, kOptionsKnown));
  result.struct_size = kOptionsKnown;
  return result;
}

pthload::LoadOptions to_load_options(const pthload_options* caller_options) {
  pthload::LoadOptions result;
  if (caller_options == nullptr) return result;
  const pthload_options read = read_options(caller_options);
  const pthload_options* options = &read;
  if (options->map_to != nullptr) {
    result.map_location = pthload::map_to(std::string_view(options->map_to));
  } else if (options->map_location != nullptr) {
    result.map_location = c_map_location(options->map_location, options->map_location_user_data);
  }
  result.copy_cpu_storages = options->copy_cpu_storages != 0;
  result.verify_crc = options->verify_crc != 0;
  result.limits.max_zip_entries = options->max_zip_entries;
  result.limits.max_inflated_record_bytes = options->max_inflated_record_bytes;
  result.limits.max_pickle_stack = static_cast<std::size_t>(options->max_pickle_stack);
  result.limits.max_pickle_memo = static_cast<std::size_t>(options->max_pickle_memo);
  result.limits.max_pickle_nesting = static_cast<std::size_t>(options->max_pickle_nesting);
  result.limits.max_pickle_values = static_cast<std::size_t>(options->max_pickle_values);
  // Added in 0.5.0: zero, what an older caller's struct lacks, is the default.
  if (options->max_overlapping_view_bytes != 0) {
    result.limits.max_overlapping_view_bytes = options->max_overlapping_view_bytes;
  }
  if (options->select != nullptr) result.filter.select = options->select;
  if (options->rename_prefix_count != 0 &&
      (options->rename_prefix_from == nullptr || options->rename_prefix_to == nullptr)) {
    throw_invalid_argument("rename_prefix_count is " +
                           std::to_string(options->rename_prefix_count) +
                           " but rename_prefix_from or rename_prefix_to is NULL");
  }
  for (std::size_t i = 0; i < options->rename_prefix_count; ++i) {
    if (options->rename_prefix_from[i] == nullptr || options->rename_prefix_to[i] == nullptr) {
      throw_invalid_argument("rename_prefix_count is " +
                             std::to_string(options->rename_prefix_count) +
                             " but a rename_prefix_from or rename_prefix_to string is NULL");
    }
    result.filter.rename_prefix.emplace_back(options->rename_prefix_from[i],
                                             options->rename_prefix_to[i]);
  }
  result.filter.only = c_strings(options->only, options->only_count, "only");
  result.filter.exclude = c_strings(options->exclude, options->exclude_count, "exclude");
  return result;
}

// open or load, from a path or from bytes: the same checks and the same hand-over of ownership.
template <typename Read>
int make_checkpoint(pthload_checkpoint** out, Read&& read) noexcept {
  if (out == nullptr) {
    return record_simple_error(Errc::kCapiInvalidArgument, "the output pointer is NULL");
  }
  *out = nullptr;
  return guarded([&] { *out = new pthload_checkpoint{read()}; });
}

template <typename Open>
int make_records(pthload_records** out, Open&& open) noexcept {
  if (out == nullptr) {
    return record_simple_error(Errc::kCapiInvalidArgument, "the output pointer is NULL");
  }
  *out = nullptr;
  return guarded([&] { *out = new pthload_records{open()}; });
}

const pthload::RecordInfo& record_at(const pthload_records* records, std::size_t index) {
  const auto list = records->reader.list();
  if (index >= list.size()) {
    throw_invalid_argument("record index " + std::to_string(index) + " is past the last of " +
                           std::to_string(list.size()));
  }
  return list[index];
}

std::span<const std::byte> caller_bytes(const void* data, std::size_t size) {
  if (data == nullptr && size != 0) throw_invalid_argument("data is NULL but size is not 0");
  return {static_cast<const std::byte*>(data), size};
}

void require_path(const char* path) {
  if (path == nullptr) throw_invalid_argument("the path is NULL");
}

// The first element's address on the CPU, or the reason there is none.
const std::byte* cpu_data(const pthload::NamedTensor& tensor) {
  if (tensor.tensor.has_storage() && !tensor.tensor.storage().is_placed()) {
    throw pthload::Error(Errc::kDeviceNotOnCpu,
                         "tensor '" + tensor.name.str() +
                             "' is not placed: pthload_open reads no data, pthload_load does");
  }
  return tensor.tensor.data();
}

bool valid_dtype(pthload_dtype dtype) noexcept {
  return static_cast<int>(dtype) >= PTHLOAD_FLOAT64 && static_cast<int>(dtype) <= PTHLOAD_BITS4X2;
}

// ---- Saving ----

constexpr const char* kSaveOptionsSetUpBy = "set the struct up with pthload_save_options_init";
constexpr const char* kSaveTensorSetUpBy = "set each up with pthload_save_tensor_init";

// The defaults, padding zeroed (see default_options): every default is zero or NULL there.
pthload_save_options default_save_options() noexcept {
  pthload_save_options options;
  std::memset(static_cast<void*>(&options), 0, sizeof options);
  options.struct_size = kSaveOptionsKnown;
  return options;  // alignment 0 (64), location and archive_name NULL ("cpu", the file's stem)
}

// What a save does with the caller's options, and whom it tells of the tensors it left out
// (SaveReport::skipped), once the file is written.
struct SaveCall {
  pthload::SaveOptions options;
  pthload_save_skipped_fn skipped = nullptr;
  void* skipped_user_data = nullptr;

  void report(const pthload::SaveReport& report) const {
    if (skipped == nullptr) return;
    for (const std::string& description : report.skipped)
      skipped(skipped_user_data, description.c_str());
  }
};

SaveCall to_save_call(const pthload_save_options* caller_options) {
  SaveCall call;
  if (caller_options == nullptr) return call;
  const std::size_t size =
      check_struct_size(declared_size(caller_options), PTHLOAD_SAVE_OPTIONS_SIZE_V1,
                        "pthload_save_options", kSaveOptionsSetUpBy);
  refuse_unknown_fields(caller_options, size, kSaveOptionsKnown, "pthload_save_options");
  pthload_save_options options = default_save_options();
  std::memcpy(static_cast<void*>(&options), caller_options, std::min(size, kSaveOptionsKnown));

  pthload::SaveOptions& result = call.options;
  result.nest_dotted_names = options.nest_dotted_names != 0;
  result.compact_views = options.compact_views != 0;
  // 0 is "the default" for every field a caller leaves zeroed; save() checks the others.
  if (options.alignment != 0) result.alignment = options.alignment;
  if (options.location != nullptr && options.location[0] != '\0') {
    result.location = options.location;
  }
  result.keep_locations = options.keep_locations != 0;
  if (options.archive_name != nullptr) result.archive_name = options.archive_name;
  result.skip_unsupported = options.skip_unsupported != 0;
  if (options.progress != nullptr) {
    result.progress = [function = options.progress, user_data = options.progress_user_data](
                          std::uint64_t written, std::uint64_t total) {
      const int answer = function(user_data, written, total);
      if (answer < 0) {
        throw pthload::Error(Errc::kCapiCallbackFailed, "the progress callback returned " +
                                                            std::to_string(answer) + " at byte " +
                                                            std::to_string(written) + " of " +
                                                            std::to_string(total));
      }
    };
  }
  call.skipped = options.skipped;
  call.skipped_user_data = options.skipped_user_data;
  return call;
}

// One caller's tensor as save() takes it. `where` names it ("tensors[2]") in errors.
pthload::MemoryTensor memory_tensor(const pthload_save_tensor& tensor, const std::string& where) {
  if (tensor.name == nullptr) throw_invalid_argument(where + ".name is NULL");
  const std::string named = where + " ('" + tensor.name + "')";
  // Read as its bytes: C lets a caller store any int there (see c_map_location).
  int dtype = 0;
  static_assert(sizeof dtype == sizeof tensor.dtype);
  std::memcpy(&dtype, &tensor.dtype, sizeof dtype);
  if (dtype < PTHLOAD_FLOAT64 || dtype > PTHLOAD_BITS4X2) {
    throw_invalid_argument(named + " has dtype " + std::to_string(dtype) +
                           ", which is no pthload_dtype");
  }
  if (tensor.ndim != 0 && tensor.sizes == nullptr) {
    throw_invalid_argument(named + " has ndim " + std::to_string(tensor.ndim) +
                           " but its sizes are NULL");
  }
  if (tensor.storage == nullptr && tensor.storage_nbytes != 0) {
    throw_invalid_argument(named + " has storage_nbytes " + std::to_string(tensor.storage_nbytes) +
                           " but its storage is NULL");
  }
  if constexpr (sizeof(std::size_t) < sizeof(std::uint64_t)) {
    if (tensor.storage_nbytes > std::numeric_limits<std::size_t>::max()) {
      throw_invalid_argument(named + " has storage_nbytes " +
                             std::to_string(tensor.storage_nbytes) +
                             ", more than this address space holds");
    }
  }
  pthload::MemoryTensor result;
  result.name = tensor.name;
  result.dtype = static_cast<pthload::Dtype>(dtype);
  result.sizes.assign(tensor.sizes, tensor.sizes + tensor.ndim);
  if (tensor.strides != nullptr)
    result.strides.assign(tensor.strides, tensor.strides + tensor.ndim);
  result.storage_offset = tensor.storage_offset;
  result.storage = {static_cast<const std::byte*>(tensor.storage),
                    static_cast<std::size_t>(tensor.storage_nbytes)};
  result.requires_grad = tensor.requires_grad != 0;
  return result;
}

// The caller's array, stepped through by its struct_size (the caller's sizeof), which every
// element must repeat: an element of another size means the array is not what the caller
// thinks, and reading on would misread every later field.
std::vector<pthload::MemoryTensor> memory_tensors(const pthload_save_tensor* tensors,
                                                  std::size_t count) {
  // Checked before anything is reserved for `count`, which a caller may have left unset.
  if (count != 0 && tensors == nullptr) {
    throw_invalid_argument("count is " + std::to_string(count) + " but tensors is NULL");
  }
  std::vector<pthload::MemoryTensor> result;
  if (count == 0) return result;
  const std::size_t stride = check_struct_size(declared_size(tensors), PTHLOAD_SAVE_TENSOR_SIZE_V1,
                                               "pthload_save_tensor", kSaveTensorSetUpBy);
  const auto* first = reinterpret_cast<const unsigned char*>(tensors);
  for (std::size_t i = 0; i < count; ++i) {
    const unsigned char* element = first + i * stride;
    const std::string where = "tensors[" + std::to_string(i) + "]";
    const std::size_t size = declared_size(element);
    if (size != stride) {
      throw_invalid_argument(where + ".struct_size is " + std::to_string(size) +
                             ", tensors[0].struct_size " + std::to_string(stride) +
                             ": every element of the array holds the caller's "
                             "sizeof(pthload_save_tensor)");
    }
    refuse_unknown_fields(element, size, kSaveTensorKnown, "pthload_save_tensor " + where);
    pthload_save_tensor tensor;
    std::memset(static_cast<void*>(&tensor), 0, sizeof tensor);
    std::memcpy(static_cast<void*>(&tensor), element, std::min(size, kSaveTensorKnown));
    result.push_back(memory_tensor(tensor, where));
  }
  return result;
}

// The caller's write function as a SaveSink: save() turns the exception into
// IoError(kSaveWriteFailed) naming the byte offset, carrying this text.
pthload::SaveSink c_sink(pthload_save_write_fn write, void* user_data) {
  if (write == nullptr) throw_invalid_argument("the write function is NULL");
  return [write, user_data](std::span<const std::byte> bytes) {
    if (bytes.empty()) return;  // pthload.h promises no call of 0 bytes
    const int answer = write(user_data, bytes.data(), bytes.size());
    if (answer != 0) {
      throw pthload::IoError(Errc::kSaveWriteFailed,
                             "the write callback returned " + std::to_string(answer));
    }
  };
}

const pthload::Checkpoint& checkpoint_to_save(const pthload_checkpoint* checkpoint) {
  if (checkpoint == nullptr) throw_invalid_argument("the checkpoint is NULL");
  return checkpoint->checkpoint;
}

}  // namespace

extern "C" {

const pthload_error* pthload_last_error(void) {
  return &last_error.view;
}

int pthload_options_init_sized(pthload_options* options, size_t size) {
  // recorded, not guarded: a success leaves the last error (pthload.h says why).
  return recorded([&] {
    if (options == nullptr) throw_invalid_argument("the options pointer is NULL");
    check_struct_size(size, PTHLOAD_OPTIONS_SIZE_V1, "pthload_options",
                      "pass sizeof(pthload_options)");
    // Padding included: a newer library reads the caller's bytes past its fields as options.
    std::memset(static_cast<void*>(options), 0, size);
    pthload_options defaults = default_options();
    defaults.struct_size = size;
    std::memcpy(static_cast<void*>(options), &defaults, std::min(size, kOptionsKnown));
  });
}

int pthload_open(const char* path, const pthload_options* options, pthload_checkpoint** out) {
  return make_checkpoint(out, [&] {
    require_path(path);
    return pthload::open(path, to_load_options(options));
  });
}

int pthload_load(const char* path, const pthload_options* options, pthload_checkpoint** out) {
  return make_checkpoint(out, [&] {
    require_path(path);
    return pthload::load(path, to_load_options(options));
  });
}

int pthload_open_bytes(const void* data, size_t size, const pthload_options* options,
                       pthload_checkpoint** out) {
  return make_checkpoint(
      out, [&] { return pthload::open(caller_bytes(data, size), to_load_options(options)); });
}

int pthload_load_bytes(const void* data, size_t size, const pthload_options* options,
                       pthload_checkpoint** out) {
  return make_checkpoint(
      out, [&] { return pthload::load(caller_bytes(data, size), to_load_options(options)); });
}

void pthload_checkpoint_free(pthload_checkpoint* checkpoint) {
  delete checkpoint;  // ~Checkpoint is noexcept
}

size_t pthload_checkpoint_tensor_count(const pthload_checkpoint* checkpoint) {
  return checkpoint->checkpoint.tensors().size();
}

const pthload_tensor* pthload_checkpoint_tensor(const pthload_checkpoint* checkpoint,
                                                size_t index) {
  const auto tensors = checkpoint->checkpoint.tensors();
  return index < tensors.size() ? handle(tensors[index]) : nullptr;
}

int pthload_checkpoint_find_tensor(const pthload_checkpoint* checkpoint, const char* name,
                                   const pthload_tensor** out) {
  if (out != nullptr) *out = nullptr;
  return guarded([&] {
    if (checkpoint == nullptr || name == nullptr || out == nullptr) {
      throw_invalid_argument("the checkpoint, the name or the output pointer is NULL");
    }
    // Checkpoint::tensor() finds the first tensor of that name (or throws the error a C++
    // caller gets) through the checkpoint's name index. It is the `tensor` member of one entry
    // of tensors(), an array: the entries' members lie in address order, so a binary search
    // by address finds the entry, its handle.
    const pthload::Tensor* found = &checkpoint->checkpoint.tensor(name);
    const auto tensors = checkpoint->checkpoint.tensors();
    const std::less<const pthload::Tensor*> before;
    const auto entry = std::partition_point(
        tensors.begin(), tensors.end(),
        [&](const pthload::NamedTensor& t) { return before(&t.tensor, found); });
    if (entry == tensors.end() || &entry->tensor != found) {
      throw pthload::Error(Errc::kCapiInternal, "Checkpoint::tensor returned no listed tensor");
    }
    *out = handle(*entry);
  });
}

const char* pthload_tensor_name(const pthload_tensor* tensor) {
  return named(tensor).name.c_str();
}

pthload_dtype pthload_tensor_dtype(const pthload_tensor* tensor) {
  return static_cast<pthload_dtype>(named(tensor).tensor.dtype());
}

pthload_layout pthload_tensor_layout(const pthload_tensor* tensor) {
  return static_cast<pthload_layout>(named(tensor).tensor.layout());
}

size_t pthload_tensor_ndim(const pthload_tensor* tensor) {
  return named(tensor).tensor.dim();
}

const int64_t* pthload_tensor_shape(const pthload_tensor* tensor) {
  return named(tensor).tensor.sizes().data();
}

const int64_t* pthload_tensor_strides(const pthload_tensor* tensor) {
  return named(tensor).tensor.strides().data();
}

int64_t pthload_tensor_storage_offset(const pthload_tensor* tensor) {
  return named(tensor).tensor.storage_offset();
}

uint64_t pthload_tensor_numel(const pthload_tensor* tensor) {
  return named(tensor).tensor.numel();
}

uint64_t pthload_tensor_nbytes(const pthload_tensor* tensor) {
  return named(tensor).tensor.nbytes();
}

int pthload_tensor_is_contiguous(const pthload_tensor* tensor) {
  return named(tensor).tensor.is_contiguous() ? 1 : 0;
}

pthload_device pthload_tensor_device(const pthload_tensor* tensor) {
  const pthload::Device device = named(tensor).tensor.device();
  return {static_cast<pthload_device_type>(device.type), device.index};
}

const void* pthload_tensor_data(const pthload_tensor* tensor) {
  const void* data = nullptr;
  // An accessor: only a NULL result touches the last error, which then says why, or is code 0
  // for an empty tensor (pthload.h).
  const int code = recorded([&] {
    if (tensor == nullptr) throw_invalid_argument("the tensor is NULL");
    data = cpu_data(named(tensor));
  });
  if (code == PTHLOAD_OK && data == nullptr) clear_last_error();
  return data;
}

const void* pthload_tensor_device_pointer(const pthload_tensor* tensor) {
  const pthload::Tensor& t = named(tensor).tensor;
  if (!t.has_storage() || t.device().type != pthload::Device::Type::kCuda) return nullptr;
  const auto* base = static_cast<const std::byte*>(t.storage().device_pointer());
  if (base == nullptr) return nullptr;
  return base + static_cast<std::size_t>(t.storage_offset()) * pthload::element_size(t.dtype());
}

int pthload_tensor_copy(const pthload_tensor* tensor, void* buffer, size_t size) {
  return guarded([&] {
    if (tensor == nullptr || (buffer == nullptr && size != 0)) {
      throw_invalid_argument("the tensor or the buffer is NULL");
    }
    cpu_data(named(tensor));  // throws the reason a tensor has no bytes here
    const pthload::Tensor& t = named(tensor).tensor;
    // Straight into the caller's buffer (Tensor::copy_to): no copy of the tensor in between.
    const std::uint64_t needed = pthload::packed_per_byte(t.dtype()) > 1
                                     ? pthload::packed_nbytes(t.dtype(), t.numel())
                                     : t.nbytes();
    if (needed > size) {
      throw_invalid_argument("tensor '" + named(tensor).name.str() + "' has " +
                             std::to_string(needed) + " bytes; the buffer holds " +
                             std::to_string(size));
    }
    (void)t.copy_to({static_cast<std::byte*>(buffer), size});
  });
}

int pthload_tensor_checksum(const pthload_tensor* tensor, uint64_t* out) {
  return guarded([&] {
    if (tensor == nullptr || out == nullptr) {
      throw_invalid_argument("the tensor or the output pointer is NULL");
    }
    cpu_data(named(tensor));  // throws the reason a tensor has no bytes here
    *out = named(tensor).tensor.content_checksum();
  });
}

int pthload_checkpoint_checksums(const pthload_checkpoint* checkpoint, size_t first, size_t count,
                                 uint64_t* out) {
  return guarded([&] {
    if (checkpoint == nullptr || (out == nullptr && count != 0)) {
      throw_invalid_argument("the checkpoint or the output array is NULL");
    }
    const auto tensors = checkpoint->checkpoint.tensors();
    if (first > tensors.size() || count > tensors.size() - first) {
      throw_invalid_argument("tensors [" + std::to_string(first) + ", " + std::to_string(first) +
                             " + " + std::to_string(count) + ") asked of a checkpoint of " +
                             std::to_string(tensors.size()));
    }
    std::vector<const pthload::Tensor*> hashed;
    hashed.reserve(count);
    for (std::size_t i = first; i < first + count; ++i) {
      try {
        cpu_data(tensors[i]);  // throws the reason a tensor has no bytes here
      } catch (...) {
        // A tensor before this one whose read fails is the first to fail: its error comes first.
        (void)pthload::content_checksums(hashed);
        throw;
      }
      hashed.push_back(&tensors[i].tensor);
    }
    const std::vector<std::uint64_t> checksums = pthload::content_checksums(hashed);
    std::copy(checksums.begin(), checksums.end(), out);
  });
}

int pthload_tensor_to_dlpack(const pthload_tensor* tensor, struct DLManagedTensor** out) {
  if (out != nullptr) *out = nullptr;
  return guarded([&] {
    if (tensor == nullptr || out == nullptr) {
      throw_invalid_argument("the tensor or the output pointer is NULL");
    }
    *out = pthload::to_dlpack(named(tensor).tensor);
  });
}

int pthload_records_open(const char* path, const pthload_options* options, pthload_records** out) {
  return make_records(out, [&] {
    require_path(path);
    return pthload::RecordReader::open(path, to_load_options(options));
  });
}

int pthload_records_open_bytes(const void* data, size_t size, const pthload_options* options,
                               pthload_records** out) {
  return make_records(out, [&] {
    return pthload::RecordReader::open(caller_bytes(data, size), to_load_options(options));
  });
}

void pthload_records_free(pthload_records* records) {
  delete records;  // ~RecordReader is noexcept
}

size_t pthload_records_count(const pthload_records* records) {
  return records->reader.list().size();
}

int pthload_records_info(const pthload_records* records, size_t index, pthload_record_info* out) {
  return guarded([&] {
    if (records == nullptr || out == nullptr) {
      throw_invalid_argument("the records handle or the output pointer is NULL");
    }
    const std::size_t size =
        check_struct_size(declared_size(out), PTHLOAD_RECORD_INFO_SIZE_V1, "pthload_record_info",
                          "set it to sizeof(pthload_record_info) before the call");
    const pthload::RecordInfo& record = record_at(records, index);
    const pthload_record_info info{.struct_size = std::min(size, kRecordInfoKnown),
                                   .name = record.name.c_str(),
                                   .payload_offset = record.payload_offset,
                                   .size = record.size,
                                   .compressed_size = record.compressed_size,
                                   .crc32 = record.crc32,
                                   .is_compressed = record.is_compressed ? 1 : 0};
    // The fields that fit in the caller's struct: an older header's is a prefix of this one.
    std::memcpy(static_cast<void*>(out), &info, std::min(size, kRecordInfoKnown));
  });
}

int pthload_records_find(const pthload_records* records, const char* name, size_t* index) {
  return guarded([&] {
    if (records == nullptr || name == nullptr || index == nullptr) {
      throw_invalid_argument("the records handle, the name or the output pointer is NULL");
    }
    const pthload::RecordInfo* record = records->reader.find(name);
    if (record == nullptr) {
      throw pthload::FormatError(Errc::kZipRecordNotFound,
                                 "no record named '" + std::string(name) + "'");
    }
    *index = static_cast<size_t>(record - records->reader.list().data());
  });
}

int pthload_records_read(const pthload_records* records, size_t index, void* buffer, size_t size) {
  return guarded([&] {
    if (records == nullptr || (buffer == nullptr && size != 0)) {
      throw_invalid_argument("the records handle or the buffer is NULL");
    }
    const pthload::RecordInfo& record = record_at(records, index);
    // Checked before reading: a small buffer must not cost an inflation.
    if (record.size > size) {
      throw_invalid_argument("record '" + record.name + "' has " + std::to_string(record.size) +
                             " bytes; the buffer holds " + std::to_string(size));
    }
    const std::vector<std::byte> bytes = records->reader.read(record.name);
    if (!bytes.empty()) std::memcpy(buffer, bytes.data(), bytes.size());
  });
}

int pthload_save_options_init_sized(pthload_save_options* options, size_t size) {
  // recorded, not guarded, as pthload_options_init_sized.
  return recorded([&] {
    if (options == nullptr) throw_invalid_argument("the options pointer is NULL");
    check_struct_size(size, PTHLOAD_SAVE_OPTIONS_SIZE_V1, "pthload_save_options",
                      "pass sizeof(pthload_save_options)");
    std::memset(static_cast<void*>(options), 0, size);
    pthload_save_options defaults = default_save_options();
    defaults.struct_size = size;
    std::memcpy(static_cast<void*>(options), &defaults, std::min(size, kSaveOptionsKnown));
  });
}

int pthload_save_tensor_init_sized(pthload_save_tensor* tensor, size_t size) {
  // recorded, not guarded, as pthload_options_init_sized.
  return recorded([&] {
    if (tensor == nullptr) throw_invalid_argument("the tensor pointer is NULL");
    check_struct_size(size, PTHLOAD_SAVE_TENSOR_SIZE_V1, "pthload_save_tensor",
                      "pass sizeof(pthload_save_tensor)");
    // Every default is zero: the whole struct, padding included, then its size.
    std::memset(static_cast<void*>(tensor), 0, size);
    tensor->struct_size = size;
  });
}

int pthload_save(const char* path, const pthload_save_tensor* tensors, size_t count,
                 const pthload_save_options* options) {
  return guarded([&] {
    require_path(path);
    const SaveCall call = to_save_call(options);
    const std::vector<pthload::MemoryTensor> memory = memory_tensors(tensors, count);
    call.report(pthload::save(std::filesystem::path(path),
                              std::span<const pthload::MemoryTensor>(memory), call.options));
  });
}

int pthload_save_checkpoint(const char* path, const pthload_checkpoint* checkpoint,
                            const pthload_save_options* options) {
  return guarded([&] {
    require_path(path);
    const SaveCall call = to_save_call(options);
    call.report(
        pthload::save(std::filesystem::path(path), checkpoint_to_save(checkpoint), call.options));
  });
}

int pthload_save_to_sink(pthload_save_write_fn write, void* user_data,
                         const pthload_save_tensor* tensors, size_t count,
                         const pthload_save_options* options) {
  return guarded([&] {
    const pthload::SaveSink sink = c_sink(write, user_data);
    const SaveCall call = to_save_call(options);
    const std::vector<pthload::MemoryTensor> memory = memory_tensors(tensors, count);
    call.report(pthload::save(sink, std::span<const pthload::MemoryTensor>(memory), call.options));
  });
}

int pthload_save_checkpoint_to_sink(pthload_save_write_fn write, void* user_data,
                                    const pthload_checkpoint* checkpoint,
                                    const pthload_save_options* options) {
  return guarded([&] {
    const pthload::SaveSink sink = c_sink(write, user_data);
    const SaveCall call = to_save_call(options);
    call.report(pthload::save(sink, checkpoint_to_save(checkpoint), call.options));
  });
}

const char* pthload_dtype_name(pthload_dtype dtype) {
  if (!valid_dtype(dtype)) return "unknown";
  return pthload::dtype_name(static_cast<pthload::Dtype>(dtype)).data();  // static literals
}

size_t pthload_dtype_size(pthload_dtype dtype) {
  if (!valid_dtype(dtype)) return 0;
  return pthload::element_size(static_cast<pthload::Dtype>(dtype));
}

const char* pthload_version(void) {
  return PTHLOAD_VERSION_STRING;  // meson.build checks it is the project's version
}

}  // extern "C"
