// Checking what is asked of save() and deciding what to write: storages shared as torch shares
// them (once, by identity), tensors checked against their storages as torch.load will check
// them (torch refuses a view past its storage at load; the writer refuses it first).
#include "writer/plan.hpp"

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <tuple>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include "checkpoint/access.hpp"
#include "checkpoint/state.hpp"
#include "common/checked.hpp"
#include "pthload/error.hpp"
#include "pthload/limits.hpp"

namespace pthload::writer {
namespace {

// Where a storage's bytes are, to share one storage among the tensors that use it: a
// checkpoint's Storage by its address, caller memory by first byte and size.
using StorageIdentity = std::tuple<const void*, std::uint64_t, bool>;

// What every tensor, whatever its source, is described by.
struct Input {
  std::string_view name;
  Dtype dtype = Dtype::kFloat32;
  std::span<const std::int64_t> sizes;
  std::span<const std::int64_t> strides;  // empty: contiguous
  std::int64_t storage_offset = 0;
  bool requires_grad = false;
  const Storage* storage = nullptr;
  std::span<const std::byte> memory;
  std::uint64_t storage_nbytes = 0;
  std::string_view source_location;  // the file's tag, for keep_locations
  const Tensor* tensor = nullptr;
  // compact_views writes what a view shows: one that overlaps itself (stride 0) may show far
  // more than its storage holds, so it is bounded as reading it is (Tensor::contiguous_bytes).
  std::uint64_t max_overlapping_view_bytes = Limits{}.max_overlapping_view_bytes;
};

[[noreturn]] void bad_tensor(std::string_view name, const std::string& why) {
  throw FormatError(Errc::kSaveBadTensor, fmt::format("tensor '{}': {}", name, why));
}

// Row-major strides for `sizes` (a size of 0 or 1 counts as 1, as torch's). A caller's sizes may
// be anything: a stride past 2^63 - 1 is refused, not wrapped.
std::vector<std::int64_t> contiguous_strides(std::string_view name,
                                             std::span<const std::int64_t> sizes) {
  std::vector<std::int64_t> strides(sizes.size());
  std::uint64_t step = 1;
  for (std::size_t d = sizes.size(); d-- > 0;) {
    strides[d] = static_cast<std::int64_t>(step);
    if (d == 0) break;
    const auto next =
        common::checked_mul(step, static_cast<std::uint64_t>(std::max<std::int64_t>(sizes[d], 1)));
    if (!next || *next > static_cast<std::uint64_t>(INT64_MAX)) {
      bad_tensor(name, "its sizes' product overflows 64 bits");
    }
    step = *next;
  }
  return strides;
}

// Elements the tensor spans from its first: (size - 1) × stride summed, plus one; 0 for an
// empty tensor. Checked: a caller's sizes may be anything.
std::uint64_t element_extent(std::string_view name, std::span<const std::int64_t> sizes,
                             std::span<const std::int64_t> strides) {
  std::uint64_t last = 0;
  for (std::size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] < 0) bad_tensor(name, fmt::format("size {} of dimension {}", sizes[d], d));
    if (strides[d] < 0) bad_tensor(name, fmt::format("stride {} of dimension {}", strides[d], d));
    if (sizes[d] == 0) return 0;
  }
  for (std::size_t d = 0; d < sizes.size(); ++d) {
    const auto step = common::checked_mul(static_cast<std::uint64_t>(sizes[d] - 1),
                                          static_cast<std::uint64_t>(strides[d]));
    const auto sum = step ? common::checked_add(last, *step) : std::nullopt;
    if (!sum) bad_tensor(name, "its sizes and strides overflow 64 bits");
    last = *sum;
  }
  return last + 1;
}

std::string unsupported_reason(const Tensor& tensor) {
  if (tensor.layout() != Layout::kStrided) {
    return fmt::format("{} tensor", layout_name(tensor.layout()));
  }
  if (tensor.quantization() != nullptr || is_quantized(tensor.dtype())) {
    return "quantized tensor";
  }
  if (const auto* subclass = tensor.wrapper_subclass()) {
    return fmt::format("tensor subclass {}", subclass->subclass);
  }
  if (!tensor.has_storage() || tensor.storage().device().type == Device::Type::kMeta) {
    return "meta tensor (no bytes)";
  }
  return {};
}

class Planner {
 public:
  explicit Planner(const SaveOptions& options) : options_(options) {
    if (!is_location_tag(options.location)) {
      throw UnsupportedError(
          Errc::kSaveBadOptions,
          fmt::format("SaveOptions::location '{}' is no location tag torch writes ('cpu', "
                      "'cuda:0', ...)",
                      options.location));
    }
  }

  void add(const Input& input) {
    std::vector<std::int64_t> strides =
        input.strides.empty() ? contiguous_strides(input.name, input.sizes)
                              : std::vector(input.strides.begin(), input.strides.end());
    if (strides.size() != input.sizes.size()) {
      bad_tensor(input.name,
                 fmt::format("{} sizes and {} strides", input.sizes.size(), strides.size()));
    }
    if (input.storage_offset < 0) {
      bad_tensor(input.name, fmt::format("storage offset {}", input.storage_offset));
    }
    const std::size_t element = element_size(input.dtype);
    const std::uint64_t extent = element_extent(input.name, input.sizes, strides);
    if (extent > 0) {
      const auto end =
          common::checked_add(static_cast<std::uint64_t>(input.storage_offset), extent);
      const auto end_bytes = end ? common::checked_mul(*end, element) : std::nullopt;
      if (!end_bytes || *end_bytes > input.storage_nbytes) {
        bad_tensor(input.name,
                   fmt::format("it spans elements [{}, {}) of {} bytes ({}), past its storage of "
                               "{} bytes",
                               input.storage_offset, end ? fmt::to_string(*end) : "2^64+",
                               dtype_name(input.dtype), element, input.storage_nbytes));
      }
    }
    // Not bounded by the extent: a view with a stride of 0 shows more elements than it spans.
    std::uint64_t numel = extent == 0 ? 0 : 1;
    for (const auto size : input.sizes) {
      const auto product = common::checked_mul(numel, static_cast<std::uint64_t>(size));
      if (!product) bad_tensor(input.name, "its element count overflows 64 bits");
      numel = *product;
    }

    PlannedTensor planned{.name = input.name,
                          .dtype = input.dtype,
                          .sizes = std::vector(input.sizes.begin(), input.sizes.end()),
                          .strides = std::move(strides),
                          .storage_offset = input.storage_offset,
                          .requires_grad = input.requires_grad};
    const StorageIdentity identity =
        input.storage != nullptr ? StorageIdentity{input.storage, 0, true}
                                 : StorageIdentity{input.memory.data(), input.memory.size(), false};

    // One tensor under two names: written once, referred back to (torch does so for one
    // object). Found by what it is (hash_view), so tied weights read from any format stay tied.
    // An empty caller span is nobody's storage: two of them are not one shared storage.
    const bool shareable = input.storage != nullptr || !input.memory.empty();
    const std::uint64_t view_hash = hash_view(identity, planned);
    if (shareable && input.storage_nbytes > 0) {
      const auto [first, last] = views_.equal_range(view_hash);
      for (auto it = first; it != last; ++it) {
        const std::size_t earlier = it->second;
        if (identities_[earlier] != identity || !same_view(earlier, planned)) continue;
        planned.storage = plan_.tensors[earlier].storage;
        planned.same_as = earlier;
        if (options_.compact_views) {
          planned.strides = plan_.tensors[earlier].strides;
          planned.storage_offset = 0;
        }
        identities_.push_back(identity);
        plan_.tensors.push_back(std::move(planned));
        return;
      }
    }
    std::size_t* shared = nullptr;  // the storage planned for this identity, SIZE_MAX if none
    if (shareable && !options_.compact_views) {
      shared = &storage_of_.try_emplace(identity, SIZE_MAX).first->second;
    }

    if (options_.compact_views) {
      const auto shown = common::checked_mul(numel, element);
      if (extent < numel && (!shown || *shown > input.max_overlapping_view_bytes)) {
        bad_tensor(input.name,
                   fmt::format("it overlaps itself (a stride of 0) and shows {} elements of {} "
                               "bytes, more than Limits::max_overlapping_view_bytes ({}) lets "
                               "compact_views write",
                               numel, element, input.max_overlapping_view_bytes));
      }
      PlannedStorage storage = new_storage(input, numel * element);
      storage.gather = std::make_unique<Gather>(Gather{.sizes = planned.sizes,
                                                       .strides = planned.strides,
                                                       .offset = planned.storage_offset,
                                                       .element_size = element,
                                                       .tensor = input.tensor});
      planned.strides = contiguous_strides(input.name, planned.sizes);
      planned.storage_offset = 0;
      planned.storage = plan_.storages.size();
      plan_.storages.push_back(std::move(storage));
    } else if (shared == nullptr || *shared == SIZE_MAX) {
      if (!legacy_storage_class(input.dtype).empty() && input.storage_nbytes % element != 0) {
        bad_tensor(input.name, fmt::format("its storage of {} bytes is no whole number of {} "
                                           "elements ({} bytes each)",
                                           input.storage_nbytes, dtype_name(input.dtype), element));
      }
      planned.storage = plan_.storages.size();
      plan_.storages.push_back(new_storage(input, input.storage_nbytes));
      if (shared != nullptr) *shared = planned.storage;
    } else {
      planned.storage = *shared;
      const PlannedStorage& storage = plan_.storages[*shared];
      if (storage.dtype != input.dtype) {
        bad_tensor(input.name,
                   fmt::format("it views storage {} as {}, which another tensor views as {}; "
                               "a storage has one dtype in a torch.save file (torch.save "
                               "refuses this too)",
                               storage.key, dtype_name(input.dtype), dtype_name(storage.dtype)));
      }
      if (storage.nbytes != input.storage_nbytes) {
        bad_tensor(input.name, fmt::format("its storage of {} bytes is also used as {} bytes",
                                           input.storage_nbytes, storage.nbytes));
      }
    }
    if (shareable) views_.emplace(view_hash, plan_.tensors.size());
    identities_.push_back(identity);
    plan_.tensors.push_back(std::move(planned));
  }

  void skip(std::string_view name, const std::string& reason) {
    if (!options_.skip_unsupported) {
      throw UnsupportedError(
          Errc::kSaveUnsupportedTensor,
          fmt::format("tensor '{}': save() does not write a {} (skip_unsupported "
                      "leaves such tensors out)",
                      name, reason));
    }
    plan_.skipped.push_back(fmt::format("{} ({})", name, reason));
  }

  Plan take() { return std::move(plan_); }

 private:
  PlannedStorage new_storage(const Input& input, std::uint64_t nbytes) {
    PlannedStorage storage;
    storage.key = fmt::to_string(plan_.storages.size());
    storage.dtype = input.dtype;
    storage.nbytes = nbytes;
    storage.location = options_.keep_locations && !input.source_location.empty()
                           ? std::string(input.source_location)
                           : options_.location;
    storage.storage = input.storage;
    storage.memory = input.memory;
    return storage;
  }

  // Whether `candidate` shows what the earlier tensor shows: same dtype, geometry (as given,
  // before compact_views made it contiguous) and requires_grad, over the same storage.
  [[nodiscard]] bool same_view(std::size_t earlier, const PlannedTensor& candidate) const {
    const PlannedTensor& first = plan_.tensors[earlier];
    const Gather* gather = plan_.storages[first.storage].gather.get();
    const auto& strides = gather != nullptr ? gather->strides : first.strides;
    const std::int64_t offset = gather != nullptr ? gather->offset : first.storage_offset;
    return first.dtype == candidate.dtype && first.requires_grad == candidate.requires_grad &&
           offset == candidate.storage_offset && first.sizes == candidate.sizes &&
           strides == candidate.strides;
  }

  struct IdentityHash {
    std::size_t operator()(const StorageIdentity& identity) const noexcept {
      const auto [pointer, size, is_storage] = identity;
      return std::hash<const void*>{}(pointer) ^ (std::hash<std::uint64_t>{}(size) << 1) ^
             static_cast<std::size_t>(is_storage);
    }
  };

  // A hash of what same_view compares, with the storage: tied names find each other in O(1)
  // however many views a storage has (a flat parameter buffer may have thousands).
  [[nodiscard]] static std::uint64_t hash_view(const StorageIdentity& identity,
                                               const PlannedTensor& tensor) {
    std::uint64_t h = IdentityHash{}(identity);
    const auto mix = [&h](std::uint64_t value) {
      h ^= value + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    };
    mix(static_cast<std::uint64_t>(tensor.dtype));
    mix(static_cast<std::uint64_t>(tensor.storage_offset));
    mix(tensor.requires_grad ? 1 : 0);
    for (const auto size : tensor.sizes)
      mix(static_cast<std::uint64_t>(size));
    for (const auto stride : tensor.strides)
      mix(static_cast<std::uint64_t>(stride));
    return h;
  }

  const SaveOptions& options_;
  Plan plan_;
  std::unordered_map<StorageIdentity, std::size_t, IdentityHash> storage_of_;
  std::unordered_multimap<std::uint64_t, std::size_t> views_;  // hash_view → tensor
  std::vector<StorageIdentity> identities_;                    // per planned tensor
};

}  // namespace

bool is_location_tag(std::string_view tag) noexcept {
  const auto colon = tag.find(':');
  const std::string_view type = tag.substr(0, colon);
  if (type.empty() || type.front() < 'a' || type.front() > 'z') return false;
  for (const char c : type) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  if (colon == std::string_view::npos) return true;
  const std::string_view index = tag.substr(colon + 1);
  if (index.empty() || index.size() > 9 || (index.size() > 1 && index.front() == '0')) {
    return false;
  }
  return std::all_of(index.begin(), index.end(), [](char c) { return c >= '0' && c <= '9'; });
}

Plan plan_save(std::span<const NamedTensor> tensors, const SaveOptions& options) {
  Planner planner(options);
  for (const NamedTensor& named : tensors) {
    const Tensor& tensor = named.tensor;
    const std::string_view name = named.name;
    if (const std::string reason = unsupported_reason(tensor); !reason.empty()) {
      planner.skip(name, reason);
      continue;
    }
    const Storage& storage = tensor.storage();
    if (!storage.is_placed()) {
      throw UnsupportedError(Errc::kSaveUnsupportedTensor,
                             fmt::format("tensor '{}': its storage was not loaded (open() reads "
                                         "no tensor bytes); save a checkpoint load() made",
                                         name));
    }
    if (storage.device().type != Device::Type::kCpu) {
      throw UnsupportedError(
          Errc::kSaveUnsupportedTensor,
          fmt::format("tensor '{}': its storage is on {}; save() reads CPU bytes "
                      "(Checkpoint::to(Device::cpu()) first)",
                      name, storage.device().to_string()));
    }
    planner.add(Input{
        .name = name,
        .dtype = tensor.dtype(),
        .sizes = tensor.sizes(),
        .strides = tensor.strides(),
        .storage_offset = tensor.storage_offset(),
        .requires_grad = tensor.requires_grad(),
        .storage = &storage,
        .storage_nbytes = storage.nbytes(),
        .source_location = storage.location(),
        .tensor = &tensor,
        .max_overlapping_view_bytes = internal::Access::state(storage).max_overlapping_view_bytes});
  }
  return planner.take();
}

Plan plan_save(std::span<const MemoryTensor> tensors, const SaveOptions& options) {
  Planner planner(options);
  for (const MemoryTensor& tensor : tensors) {
    if (is_quantized(tensor.dtype)) {
      planner.skip(tensor.name, "quantized tensor");
      continue;
    }
    if (tensor.storage.data() == nullptr && !tensor.storage.empty()) {
      bad_tensor(tensor.name, "its storage is a null pointer");
    }
    planner.add(Input{.name = tensor.name,
                      .dtype = tensor.dtype,
                      .sizes = tensor.sizes,
                      .strides = tensor.strides,
                      .storage_offset = tensor.storage_offset,
                      .requires_grad = tensor.requires_grad,
                      .memory = tensor.storage,
                      .storage_nbytes = tensor.storage.size()});
  }
  return planner.take();
}

}  // namespace pthload::writer
