// Storages (bytes, shared) and tensors (a dtype and a geometry over a storage).
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pthload/device.hpp"
#include "pthload/dtype.hpp"
#include "pthload/export.hpp"

namespace pthload {

namespace internal {
// The library's own: what a Storage holds, and the one class its layers reach private members
// through (defined in lib/, never by users).
struct StorageState;
struct Access;
}  // namespace internal

/// How a tensor's elements are laid out: dense (strided), one of torch's sparse layouts, whose
/// data lives in part tensors (Tensor::parts()), or nested (torch.nested.nested_tensor,
/// _rebuild_nested_tensor), whose parts are its components.
enum class Layout : std::uint8_t {
  kStrided,
  kSparseCoo,
  kSparseCsr,
  kSparseCsc,
  kSparseBsr,
  kSparseBsc,
  kNested
};
/// torch's name without `torch.`: "strided", "sparse_coo", "sparse_csr", ...; "nested" for
/// kNested (torch itself reports such a tensor's layout as strided). The view is static.
[[nodiscard]] PTHLOAD_API std::string_view layout_name(Layout layout) noexcept;
/// The names of a sparse layout's parts, in torch's order (as tools/torch_dump.py names them):
/// COO {"indices", "values"}; CSR and BSR {"crow_indices", "col_indices", "values"}; CSC and
/// BSC {"ccol_indices", "row_indices", "values"}; none for kStrided and kNested (whose parts are
/// named by their index). The views are static.
[[nodiscard]] PTHLOAD_API std::span<const std::string_view> sparse_part_names(
    Layout layout) noexcept;

/// torch's quantization schemes that torch.save writes (torch.per_tensor_affine, ...).
enum class QScheme : std::uint8_t {
  kPerTensorAffine,
  kPerChannelAffine,
  kPerChannelAffineFloatQParams
};
/// "per_tensor_affine", "per_channel_affine", "per_channel_affine_float_qparams".
[[nodiscard]] PTHLOAD_API std::string_view qscheme_name(QScheme scheme) noexcept;

struct Quantization;

/// A `__torch_dispatch__` wrapper subclass without storage (torch._utils._rebuild_wrapper_subclass,
/// as FakeTensor- or DTensor-like classes pickle themselves): its class and its device.
struct WrapperSubclass {
  /// The subclass, "module.QualName" as the pickle names it.
  std::string subclass;
  /// The device string saved in the file ("cpu", "cuda:0", "xla:0").
  std::string location;
  /// Where map_location sent it, set by load(); after open(), the saved device when pthload
  /// has a type for it, else nullopt.
  std::optional<Device> device;
};

/// One storage of a checkpoint: a run of bytes that tensors view. Shared: every tensor that
/// views it holds it, so it lives as long as the last of them (or the Checkpoint). Created by
/// open() (not placed: metadata only) and placed by load(): on CPU as a read-only view into the
/// memory-mapped file or an owned 64-byte aligned buffer; on CUDA as device memory.
class PTHLOAD_API Storage {
 public:
  /// Not copyable: shared through std::shared_ptr (Tensor::shared_storage(),
  /// Checkpoint::storages()).
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  /// Releases the bytes this owns (an owned copy, device memory) unless a hold keeps them
  /// (Tensor::hold_bytes); a view of the file unmaps nothing while the mapping is shared.
  ~Storage();

  /// The key in the file ("0"); the record is `<top>/data/<key>`. Valid while this Storage
  /// lives.
  [[nodiscard]] std::string_view key() const noexcept;
  /// The location tag torch saved ("cpu", "cuda:0"). Valid while this Storage lives.
  [[nodiscard]] std::string_view location() const noexcept;
  /// The element type the file declares for the storage (uint8 for an untyped storage).
  [[nodiscard]] Dtype dtype() const noexcept;
  /// Its size in bytes, as the file declares it (element count × element size).
  [[nodiscard]] std::uint64_t nbytes() const noexcept;
  /// Whether load() placed the bytes (open() never does).
  [[nodiscard]] bool is_placed() const noexcept;
  /// Where the bytes are; Device::cpu() for a storage that is not placed yet.
  [[nodiscard]] Device device() const noexcept;
  /// Whether the bytes are a zero-copy view of the mapped file (CPU only).
  [[nodiscard]] bool is_file_view() const noexcept;
  /// Whether the bytes are held by the pickle itself — a numpy array's data, not a storage
  /// record — so key() is a name pthload made up ("<numpy 0>"), not a key in the file.
  [[nodiscard]] bool is_in_pickle() const noexcept;
  /// The bytes, when placed on the CPU; valid while this Storage lives. Throws
  /// DeviceError(kDeviceNotOnCpu) otherwise.
  [[nodiscard]] std::span<const std::byte> bytes() const;
  /// Copies `destination.size()` bytes of a storage placed on the CPU, from byte `offset`. A
  /// view of the file is read with pread, not through the mapping: a file truncated or
  /// rewritten since the load gives IoError (kIoUnexpectedEof) naming the file, record and
  /// offset, where reading bytes() would raise SIGBUS. Throws as bytes() does, and
  /// FormatError(kTorchTensorOutOfBounds) when the range runs past nbytes().
  void read(std::uint64_t offset, std::span<std::byte> destination) const;
  /// The device address of a CUDA storage (nullptr for others and for empty storages).
  [[nodiscard]] const void* device_pointer() const noexcept;

 private:
  friend struct internal::Access;
  explicit Storage(internal::StorageState& state) noexcept;

  // Owned by the object the library makes each Storage part of, in the same allocation as the
  // shared_ptr's control block (100 000 storages: 100 000 allocations fewer).
  internal::StorageState* state_;
};

/// A tensor: dtype, sizes, strides and offset (both in elements) over a shared Storage,
/// exactly as torch rebuilds it. Made by open(), load() and load_slice(), never by callers.
/// Copyable: copies share the storage (and every other part), so a copy costs a few atomic
/// increments, and any copy keeps the storage alive after its Checkpoint is gone.
class PTHLOAD_API Tensor {
 public:
  /// A copy shares the storage and every other part. Throws std::bad_alloc (a tensor of more
  /// than two dimensions copies its sizes and strides).
  Tensor(const Tensor& other);
  /// Leaves `other` with no dimensions and no storage: it may only be destroyed or assigned to.
  Tensor(Tensor&& other) noexcept;
  /// As the copy constructor.
  Tensor& operator=(const Tensor& other);
  /// As the move constructor.
  Tensor& operator=(Tensor&& other) noexcept;
  /// Releases this tensor's share of its storage (the last share releases the storage).
  ~Tensor();

  /// The element type, as torch reports it (for a converted storage, the converted dtype).
  [[nodiscard]] Dtype dtype() const noexcept { return dtype_; }
  /// The size of each dimension, dim() of them; valid while this Tensor lives.
  [[nodiscard]] std::span<const std::int64_t> sizes() const noexcept {
    return dims_.all().first(dim());
  }
  /// The stride of each dimension in elements, dim() of them, as torch saved them (may be 0 or
  /// any order); valid while this Tensor lives.
  [[nodiscard]] std::span<const std::int64_t> strides() const noexcept {
    return dims_.all().subspan(dim());
  }
  /// Where the first element is in the storage, in elements (0 for a tensor without one).
  [[nodiscard]] std::int64_t storage_offset() const noexcept { return storage_offset_; }
  /// The requires_grad flag torch saved (a Parameter's is true).
  [[nodiscard]] bool requires_grad() const noexcept { return requires_grad_; }
  /// The number of dimensions (0 for a scalar).
  [[nodiscard]] std::size_t dim() const noexcept { return dims_.all().size() / 2; }
  /// The product of the sizes (1 for a 0-dim tensor).
  [[nodiscard]] std::uint64_t numel() const noexcept;
  /// numel() × element_size(dtype()).
  [[nodiscard]] std::uint64_t nbytes() const noexcept;
  /// Whether the strides are the row-major ones for the sizes (torch's is_contiguous()).
  [[nodiscard]] bool is_contiguous() const noexcept;
  /// Whether the tensor views a storage: false for meta and sparse tensors, whose storage()
  /// must not be called.
  [[nodiscard]] bool has_storage() const noexcept { return storage_ != nullptr; }
  /// The storage this tensor views; only when has_storage(). Valid while this Tensor (or any
  /// holder of the storage) lives.
  [[nodiscard]] const Storage& storage() const noexcept { return *storage_; }
  /// The storage as a shared pointer, for keeping it beyond this tensor; null when
  /// !has_storage().
  [[nodiscard]] const std::shared_ptr<const Storage>& shared_storage() const noexcept {
    return storage_;
  }
  /// The storage's device; Device::meta() for a meta tensor; a sparse tensor's values' device; a
  /// nested tensor's components' device; a wrapper subclass's device (meta when it has none
  /// pthload knows).
  [[nodiscard]] Device device() const noexcept;
  /// Dense (kStrided), one of the sparse layouts, or nested.
  [[nodiscard]] Layout layout() const noexcept { return layout_; }
  /// The tensors that hold a storage-less tensor's data: a sparse tensor's parts, named by
  /// sparse_part_names(layout()); a nested tensor's components (strided views of one storage), in
  /// order; empty for other tensors. Valid while this Tensor (or a copy) lives.
  [[nodiscard]] std::span<const Tensor> parts() const noexcept;
  /// A wrapper subclass's class and device; nullptr for other tensors. Valid while this Tensor
  /// (or a copy) lives.
  [[nodiscard]] const WrapperSubclass* wrapper_subclass() const noexcept;
  /// How a quantized tensor (dtype qint8, quint8, qint32, quint4x2...) maps its integers to
  /// reals; nullptr for other tensors. Valid while this Tensor (or a copy) lives.
  [[nodiscard]] const Quantization* quantization() const noexcept;
  /// The first element's address on the CPU (the storage's bytes from storage_offset on);
  /// valid while the storage lives. Throws DeviceError(kDeviceNotOnCpu) when not on the CPU,
  /// UnsupportedError(kTorchTensorWithoutData) for a tensor without storage.
  [[nodiscard]] const std::byte* data() const;
  /// A hold on the bytes data() or the storage's device_pointer() shows now: while any copy of
  /// it lives they stay valid and unchanged — after the Checkpoint is gone, and after
  /// Checkpoint::to() moves the storage (the hold then owns the bytes moved away from; the new
  /// ones need a new hold). For handing a tensor to another runtime without a copy;
  /// to_dlpack() takes one. nullptr for a tensor without storage (sparse and nested tensors:
  /// hold their parts()). Thread-safe. Throws std::bad_alloc.
  [[nodiscard]] std::shared_ptr<const void> hold_bytes() const;
  /// A copy of the elements in row-major order, as one contiguous run of bytes (for quint4x2
  /// and quint2x4, the packed bytes: ceil(numel / packed_per_byte) of them). Throws as data(),
  /// and FormatError(kTorchLimitExceeded) for a view that overlaps itself (stride 0) and shows
  /// more than Limits::max_overlapping_view_bytes: a tiny file must not make it allocate
  /// terabytes.
  /// A storage that is a view of the file is read with pread, not through the mapping, so a
  /// file truncated since the load gives IoError (kIoUnexpectedEof), never SIGBUS.
  [[nodiscard]] std::vector<std::byte> contiguous_bytes() const;
  /// What contiguous_bytes() returns, written into the start of `destination` instead, with no
  /// buffer in between: a contiguous view of the file is read straight into it with pread. For
  /// callers that own the memory the elements go to (pthload_tensor_copy). Returns how many
  /// bytes it wrote: nbytes(), or for quint4x2 and quint2x4 packed_nbytes(dtype(), numel()).
  /// Throws as contiguous_bytes(), and FormatError(kTorchTensorOutOfBounds) when `destination`
  /// holds fewer bytes than that (then it writes nothing). A read that fails part-way may leave
  /// `destination` partly written.
  std::uint64_t copy_to(std::span<std::byte> destination) const;
  /// XXH3-64 of the elements in row-major order as little-endian bytes — what a view shows,
  /// not its whole storage; a quantized tensor hashes its integers. pthinspect's `--checksum`.
  /// Owned bytes are hashed in place; a view of the file is read with pread (1 MiB at a time; a
  /// strided view through one copy of the bytes it spans).
  /// Throws as contiguous_bytes(), and kTorchLimitExceeded for the same reason: time.
  [[nodiscard]] std::uint64_t content_checksum() const;

 private:
  // The torch layer attaches quantization and wrapper subclasses, the device layer changes the
  // dtype of converted storages' tensors: through internal::Access, not public setters.
  friend struct internal::Access;

  // What few tensors have: parts (sparse, nested), a quantization, a wrapper subclass. Made
  // once, shared by copies, replaced whole (Access): one pointer where the three took 56 bytes
  // of every tensor of a 100 000-tensor checkpoint.
  struct PTHLOAD_HIDDEN Extras;

  // A tensor over `storage` (sizes and strides of one length, copied), or without one: on the
  // meta device, a sparse tensor whose data are its `parts`, a nested tensor whose parts are its
  // components. Made through internal::Access by the layers that rebuild tensors.
  Tensor(std::shared_ptr<const Storage> storage, Dtype dtype, std::span<const std::int64_t> sizes,
         std::span<const std::int64_t> strides, std::int64_t storage_offset, bool requires_grad);
  Tensor(Layout layout, Dtype dtype, std::span<const std::int64_t> sizes,
         std::span<const std::int64_t> strides, bool requires_grad, std::vector<Tensor> parts);

  // The sizes, then the strides: inside the tensor up to two dimensions (almost every tensor
  // of a checkpoint), else one allocation. What it does is in lib/checkpoint/tensor.cpp; only
  // its layout is here, because a Tensor is held by value.
  struct PTHLOAD_HIDDEN Dims {
    Dims(std::span<const std::int64_t> sizes, std::span<const std::int64_t> strides);
    Dims(const Dims& other);
    Dims(Dims&& other) noexcept;  // leaves `other` empty, as a moved-from vector
    Dims& operator=(const Dims& other);
    Dims& operator=(Dims&& other) noexcept;
    ~Dims();
    [[nodiscard]] std::span<const std::int64_t> all() const noexcept {
      return {heap ? heap.get() : inline_values, count};
    }

    static constexpr std::size_t kInline = 4;
    std::unique_ptr<std::int64_t[]> heap;
    std::int64_t inline_values[kInline] = {};
    std::size_t count = 0;
  };

  [[nodiscard]] std::span<const std::byte> packed_bytes() const;

  std::shared_ptr<const Storage> storage_;
  std::shared_ptr<const Extras> extras_;
  Dims dims_;
  std::int64_t storage_offset_;
  Dtype dtype_;
  bool requires_grad_;
  Layout layout_ = Layout::kStrided;
};

/// The parameters of a quantized tensor (torch/_utils.py _rebuild_qtensor): real value =
/// (integer - zero_point) × scale, per tensor or per slice along `axis`.
struct Quantization {
  QScheme scheme = QScheme::kPerTensorAffine;
  /// kPerTensorAffine only.
  double scale = 1.0;
  std::int64_t zero_point = 0;
  /// The per-channel schemes: the dimension the channels run along, and one scale and one
  /// zero point per channel (1-D tensors of sizes()[axis] elements, as the file stores them:
  /// float64 and int64, or for kPerChannelAffineFloatQParams float32 and float32).
  std::int64_t axis = 0;
  std::optional<Tensor> scales;
  std::optional<Tensor> zero_points;
};

/// A tensor's name, its path from the checkpoint's root ("layers.0.weight"): NUL-terminated
/// text that every copy keeps alive, so a name stays valid after its Checkpoint is gone, as the
/// tensor does. A checkpoint keeps the names it makes in a few shared blocks (100 000 names of
/// an optimizer state are then no 100 000 allocations); a name made from other text owns a
/// copy of it. Reads as a std::string_view.
class TensorName {
 public:
  /// The empty name.
  TensorName() noexcept = default;
  /// A copy of `text`, owned by this name and its copies. Throws std::bad_alloc.
  TensorName(std::string_view text) : size_(text.size()) {  // NOLINT: a name is text
    if (text.empty()) return;
    auto block = std::make_shared<char[]>(text.size() + 1);
    text.copy(block.get(), text.size());
    text_ = std::shared_ptr<const char>(block, block.get());
  }
  /// As TensorName(std::string_view).
  TensorName(const std::string& text) : TensorName(std::string_view(text)) {}  // NOLINT
  /// As TensorName(std::string_view); `text` must be NUL-terminated.
  TensorName(const char* text) : TensorName(std::string_view(text)) {}  // NOLINT

  /// The text; valid while this name (or a copy) lives.
  [[nodiscard]] std::string_view view() const noexcept { return {data(), size_}; }
  /// view(), implicitly: a name passes wherever text is taken.
  operator std::string_view() const noexcept { return view(); }  // NOLINT: reads as text
  /// The text, NUL-terminated; valid while this name (or a copy) lives.
  [[nodiscard]] const char* c_str() const noexcept { return data(); }
  /// c_str(), as std::string names it.
  [[nodiscard]] const char* data() const noexcept { return text_ ? text_.get() : ""; }
  /// Characters, the NUL excepted.
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  /// A copy as a std::string, the caller's. Throws std::bad_alloc.
  [[nodiscard]] std::string str() const { return std::string(view()); }
  /// A copy, for code that keeps names as strings. Throws std::bad_alloc.
  operator std::string() const { return str(); }  // NOLINT: a name is text

  /// Compares the text with any text: another name, a std::string_view, a std::string, a
  /// C string (each converts to std::string_view; C++20 rewrites `!=`, `<` and the reversed
  /// forms from these two). Concatenate through view() or str().
  friend bool operator==(const TensorName& a, std::string_view b) noexcept { return a.view() == b; }
  friend std::strong_ordering operator<=>(const TensorName& a, std::string_view b) noexcept {
    return a.view() <=> b;
  }
  /// Writes the text (a template, so that this header needs only <iosfwd>).
  template <typename Traits>
  friend std::basic_ostream<char, Traits>& operator<<(std::basic_ostream<char, Traits>& stream,
                                                      const TensorName& name) {
    return stream << name.view();
  }

 private:
  friend struct internal::Access;
  // `text` (NUL-terminated, `size` chars) inside a block `owner` keeps.
  TensorName(std::shared_ptr<const void> owner, const char* text, std::size_t size) noexcept
      : text_(std::move(owner), text), size_(size) {}

  std::shared_ptr<const char> text_;
  std::size_t size_ = 0;
};

/// A tensor and its path from the checkpoint's root ("layers.0.weight").
struct NamedTensor {
  TensorName name;  ///< its path from the root, as docs/naming.md makes it
  Tensor tensor;
};

/// Tensor::content_checksum() of each of `tensors` (none null), in order: the same values, and
/// the exception the first tensor whose checksum fails would throw. Faster where many small
/// tensors view a file: content_checksum() reads each with a pread of its own (100 000 tensors
/// of an optimizer state: 100 000 system calls), where this reads the bytes of neighbouring
/// storages together, in file order, up to 1 MiB a pread, through one buffer. A file that
/// shrank since the load gives IoError, as content_checksum() does, never SIGBUS. Throws as
/// content_checksum(), and std::bad_alloc.
[[nodiscard]] PTHLOAD_API std::vector<std::uint64_t> content_checksums(
    std::span<const Tensor* const> tensors);

}  // namespace pthload
