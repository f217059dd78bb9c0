// Names of zip compression methods, for error messages (APPNOTE 4.4.5).
#include "zip/methods.hpp"

namespace pthload::zip {

std::string_view method_name(std::uint16_t method) noexcept {
  switch (method) {
    case 0:
      return "stored";
    case 1:
      return "shrunk";
    case 6:
      return "imploded";
    case 8:
      return "deflate";
    case 9:
      return "deflate64";
    case 12:
      return "bzip2";
    case 14:
      return "lzma";
    case 93:
      return "zstd";
    case 95:
      return "xz";
    case 96:
      return "jpeg";
    case 97:
      return "wavpack";
    case 98:
      return "ppmd";
    case 99:
      return "aes-encrypted";
    default:
      return "";
  }
}

}  // namespace pthload::zip
