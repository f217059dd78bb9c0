// SpelledBytes: one decode per spelling of bytes (see spelled_bytes.hpp).
#include "torch/spelled_bytes.hpp"

#include <span>
#include <string>

namespace pthload::torch {

std::shared_ptr<const common::MappedFile> SpelledBytes::bytes(
    const pickle::BytesSpelling& spelling) {
  // The text and the form together fix the bytes: one str encoded as latin1 and as utf-8 gives
  // two byte strings of different lengths, so the text alone is no key.
  auto& decoded = decoded_[{spelling.source, spelling.form}];
  if (!decoded) {
    const std::string text = pickle::bytes_of(spelling);
    decoded = std::make_shared<const common::MappedFile>(
        common::MappedFile::from_bytes(std::as_bytes(std::span(text.data(), text.size()))));
  }
  return decoded;
}

}  // namespace pthload::torch
