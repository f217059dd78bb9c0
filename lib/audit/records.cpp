// RecordReader: the public face of the zip layer, for auditing a checkpoint's records.
#include "pthload/records.hpp"

#include <cstring>

#include <functional>
#include <optional>
#include <string>
#include <utility>

#include "common/check.hpp"
#include "common/mapped_file.hpp"
#include "formats/read_image.hpp"
#include "pthload/error.hpp"
#include "zip/archive.hpp"

namespace pthload {
namespace {

RecordInfo info_of(const zip::Entry& entry) {
  return {.name = std::string(entry.name),
          .payload_offset = entry.data_offset,
          .size = entry.uncompressed_size,
          .compressed_size = entry.compressed_size,
          .crc32 = entry.crc32,
          .is_compressed = entry.method != zip::kMethodStored};
}

}  // namespace

// The mapping, the archive parsed over it and the list handed out, built once by open(). The
// archive borrows the mapping's bytes, which stay put: the State lives behind a unique_ptr.
struct PTHLOAD_HIDDEN RecordReader::State {
  State(common::MappedFile mapped, std::string name, const LoadOptions& options)
      : file(std::move(mapped)), path(std::move(name)), verify_crc(options.verify_crc) {
    common::with_context({.path = path},
                         [&] { archive.emplace(zip::Archive::parse(file, options.limits)); });
    records.reserve(archive->entries().size());
    for (const zip::Entry& entry : archive->entries())
      records.push_back(info_of(entry));
  }

  [[nodiscard]] const zip::Entry& entry(std::string_view name) const {
    return common::with_context({.path = path},
                                [&]() -> const zip::Entry& { return archive->at(name); });
  }

  common::MappedFile file;
  std::string path;
  bool verify_crc;
  std::optional<zip::Archive> archive;
  std::vector<RecordInfo> records;
};

RecordReader::RecordReader(std::unique_ptr<State> state) noexcept : state_(std::move(state)) {}
RecordReader::RecordReader(RecordReader&&) noexcept = default;
RecordReader& RecordReader::operator=(RecordReader&&) noexcept = default;
RecordReader::~RecordReader() = default;

RecordReader RecordReader::open(const std::filesystem::path& path, const LoadOptions& options) {
  const std::string name = path.string();
  auto file = common::with_context({.path = name},
                                   [&] { return formats::index_file_image(path, options.limits); });
  return RecordReader(std::make_unique<State>(std::move(file), name, options));
}

RecordReader RecordReader::open(std::span<const std::byte> bytes, const LoadOptions& options) {
  return RecordReader(
      std::make_unique<State>(common::MappedFile::borrow(bytes), "<memory>", options));
}

std::span<const RecordInfo> RecordReader::list() const noexcept {
  return state_->records;
}

// records[i] describes entries()[i]: the archive's index finds the entry, its position the info.
const RecordInfo* RecordReader::find(std::string_view name) const noexcept {
  const zip::Entry* entry = state_->archive->find(name);
  if (entry == nullptr) return nullptr;
  const auto index = static_cast<std::size_t>(entry - state_->archive->entries().data());
  return &state_->records[index];
}

std::vector<std::byte> RecordReader::read(std::string_view name) const {
  const zip::Entry& entry = state_->entry(name);
  return common::with_context({.path = state_->path}, [&] {
    const auto record = state_->archive->read(entry);
    const auto bytes = record.bytes();
    std::vector<std::byte> contents(bytes.size());
    // A stored record is read with pread (the image holds only the index): a file truncated
    // since open() gives IoError, not SIGBUS.
    if (record.is_view()) {
      state_->file.copy_out(bytes, contents, entry.name);
    } else if (!bytes.empty()) {
      std::memcpy(contents.data(), bytes.data(), bytes.size());
    }
    if (state_->verify_crc) zip::Archive::check_crc(entry, contents);
    return contents;
  });
}

void RecordReader::verify_crc(std::string_view name) const {
  const zip::Entry& entry = state_->entry(name);
  common::with_context({.path = state_->path}, [&] { state_->archive->verify_crc(entry); });
}

// torch never checks CRCs (a loader that did would refuse files torch reads): this is the audit.
std::vector<RecordProblem> RecordReader::verify_all(
    const std::function<void(std::uint64_t bytes)>& progress) const {
  std::vector<RecordProblem> problems;
  for (const zip::Entry& entry : state_->archive->entries()) {
    try {
      state_->archive->verify_crc(entry);
    } catch (Error& e) {
      common::fill_missing(e.context(), {.path = state_->path});
      problems.push_back({std::string(entry.name), e.what()});
    }
    if (progress) progress(entry.compressed_size);
  }
  return problems;
}

}  // namespace pthload
