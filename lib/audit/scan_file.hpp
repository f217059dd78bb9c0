// scan() over a file already open: what the public scan(path) runs, and what fuzz_audit feeds
// bytes to.
#pragma once

#include <string_view>

#include "common/mapped_file.hpp"
#include "pthload/options.hpp"
#include "pthload/scan.hpp"

namespace pthload::audit {

/// scan() of `file`, whose path (for torch.load's .safetensors dispatch) is `path`. Never throws
/// for what the file holds (bad_alloc aside).
[[nodiscard]] ScanReport scan_file(const common::MappedFile& file, std::string_view path,
                                   const LoadOptions& options);

}  // namespace pthload::audit
