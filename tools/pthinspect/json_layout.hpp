// JSON documents written a piece at a time, laid out exactly as nlohmann's dump(1) of the whole
// document would be: a command over 100 000 tensors keeps text, not a tree of 100 000 objects.
#pragma once

#include <cstddef>
#include <ostream>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace pthinspect {

/// `value` as JSON text, laid out with `indent` (-1: on one line). Bytes that are no valid UTF-8
/// (a Python key with a lone surrogate, which pickle writes with 'surrogatepass') show as U+FFFD,
/// one per byte, rather than failing the command.
[[nodiscard]] std::string json_text(const nlohmann::json& value, int indent = -1);

/// json_text(value, 1) as it reads `depth` levels down a document laid out with indent 1.
[[nodiscard]] std::string indented(const nlohmann::json& value, std::size_t depth);

/// Appends the list `values` as indented() lays it out `depth` levels down.
void append_int_list(std::string& out, std::span<const std::int64_t> values, std::size_t depth);

/// A list one level down a document laid out with indent 1, written an item at a time: each
/// item is already indented() two levels down.
class ListWriter {
 public:
  explicit ListWriter(std::ostream& out) : out_(out) {}
  void item(std::string_view text);
  /// Ends the list (`[]` when it had no item).
  void close();

 private:
  std::ostream& out_;
  bool empty_ = true;
};

/// Writes `{"<key>": [<items>]}` laid out with indent 1, each item already indented() two levels
/// down.
void write_document_of_list(std::ostream& out, std::string_view key,
                            std::span<const std::string> items);

}  // namespace pthinspect
