// Bytes that protocol 2 spells as calls (_codecs.encode(text, 'latin1'), bytearray(...); see
// pickle/codecs.hpp), decoded once per spelling while the tensors of one pickle are built.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <utility>

#include "common/mapped_file.hpp"
#include "pickle/codecs.hpp"

namespace pthload::torch {

/// Decoded bytes by spelling: the node holding them (text, or bytes) and its encoding. A pickle
/// may share one spelling among any number of arrays through the memo, each a few bytes of
/// pickle; decoding it for each would cost arrays × its size. The spellings' nodes are the
/// pickle's, which outlive this, so an address is never reused for another node.
class SpelledBytes {
 public:
  /// The bytes `spelling` stands for, decoded on its first call and shared after: an owned copy
  /// (aligned, as MappedFile::from_bytes makes it) that the returned pointer keeps alive. Throws
  /// as pickle::bytes_of.
  [[nodiscard]] std::shared_ptr<const common::MappedFile> bytes(
      const pickle::BytesSpelling& spelling);
  /// How many distinct spellings were decoded (tests).
  [[nodiscard]] std::size_t size() const noexcept { return decoded_.size(); }

 private:
  std::map<std::pair<const pickle::Value*, pickle::BytesSpelling::Form>,
           std::shared_ptr<const common::MappedFile>>
      decoded_;
};

}  // namespace pthload::torch
