// A JSON document parsed by nlohmann-json and freed without allocating.
//
// nlohmann's destructor frees a container by moving its children onto a std::vector first (so
// that deep documents do not recurse), and that vector is allocated inside a noexcept
// destructor: a document destroyed while memory is exhausted — the partial tree of a parse that
// ran out of memory, or a whole one unwound by another bad_alloc — calls std::terminate. A
// JsonTree takes its tree apart leaves first before nlohmann sees it, so that every container
// nlohmann frees is empty and nothing is allocated.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

namespace pthload::safetensors {

/// Whether `text` nests arrays and objects at most `max_depth` deep (brackets inside strings
/// do not count). Linear, allocates nothing. A JsonTree's teardown recurses once per level, so
/// callers bound the depth with this (or a SAX pass of their own) before parsing.
[[nodiscard]] bool nesting_within(std::string_view text, int max_depth) noexcept;

class JsonTree {
 public:
  /// Parses `text`, whose nesting the caller has bounded. Throws what nlohmann::json::parse
  /// throws (parse_error with the byte position, out_of_range for 1e999) and std::bad_alloc,
  /// having freed the partial tree without allocating.
  explicit JsonTree(std::string_view text);
  JsonTree(const JsonTree&) = delete;
  JsonTree& operator=(const JsonTree&) = delete;
  ~JsonTree();

  [[nodiscard]] const nlohmann::json& root() const noexcept { return root_; }

 private:
  nlohmann::json root_;
};

}  // namespace pthload::safetensors
