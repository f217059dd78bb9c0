// JSON documents written a piece at a time (json_layout.hpp).
#include "json_layout.hpp"

#include <fmt/format.h>

#include <iterator>

namespace pthinspect {

std::string json_text(const nlohmann::json& value, int indent) {
  return value.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string indented(const nlohmann::json& value, std::size_t depth) {
  const std::string text = json_text(value, 1);
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    out += c;
    // JSON strings escape their newlines: every raw one begins a line of the layout.
    if (c == '\n') out.append(depth, ' ');
  }
  return out;
}

void append_int_list(std::string& out, std::span<const std::int64_t> values, std::size_t depth) {
  if (values.empty()) {
    out += "[]";
    return;
  }
  out += "[\n";
  for (std::size_t i = 0; i < values.size(); ++i) {
    out.append(depth + 1, ' ');
    fmt::format_to(std::back_inserter(out), "{}{}", values[i],
                   i + 1 < values.size() ? ",\n" : "\n");
  }
  out.append(depth, ' ');
  out += ']';
}

void ListWriter::item(std::string_view text) {
  out_ << (empty_ ? "[\n  " : ",\n  ") << text;
  empty_ = false;
}

void ListWriter::close() {
  out_ << (empty_ ? "[]" : "\n ]");
}

void write_document_of_list(std::ostream& out, std::string_view key,
                            std::span<const std::string> items) {
  out << "{\n " << json_text(std::string(key)) << ": ";
  ListWriter list(out);
  for (const std::string& item : items)
    list.item(item);
  list.close();
  out << "\n}";
}

}  // namespace pthinspect
