// Reading what a zip archive's index needs into an io=read image of the file (see
// common::MappedFile::image): end records, central directory, local headers, and the payloads
// a caller does not leave out.
#pragma once

#include <functional>
#include <optional>

#include "common/mapped_file.hpp"
#include "pthload/limits.hpp"
#include "zip/central_directory.hpp"
#include "zip/end_records.hpp"
#include "zip/entry.hpp"

namespace pthload::zip {

/// Fills `image` (an image() of a file that starts like a zip archive) with every byte
/// Archive::parse reads, and every record payload except those `leave_out` names, with as few
/// pread calls as the layout allows. Where the end records or the central directory cannot be
/// made sense of, it reads the whole file when that is at most 16 MiB, so that parse() reports
/// the problem exactly as over a mapping; a larger one (a truncated download) keeps only its
/// tail, from which parse() reports a missing or broken end record. Returns the end records and
/// central directory it parsed (over the image, where parse() reads them too) for
/// Archive::parse to take, or nothing where it could not make sense of them. Throws IoError (a
/// read failed, or the file shrank).
///
/// With LocalHeaders::kResolved the local headers are read through a reused buffer and checked
/// there (CentralDirectory::local_headers_resolved), not kept in the image: for an io=map load,
/// whose storages are views of the mapping, the image then holds the central directory and the
/// pickles only — for 100 000 small storages, whose headers lie between them, half the bytes.
/// Where a header fails its checks they are all read into the image as with kIntoImage, so
/// that parse() reports the problem as it always does.
enum class LocalHeaders { kIntoImage, kResolved };
[[nodiscard]] std::optional<CentralDirectory> fill_archive_image(
    const common::MappedFile& image, const Limits& limits,
    const std::function<bool(const Entry&)>& leave_out,
    LocalHeaders local_headers = LocalHeaders::kIntoImage);

}  // namespace pthload::zip
