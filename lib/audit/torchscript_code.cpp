// A tokenizer of the Python subset TorchScript writes (torch/csrc/jit/serialization/
// python_print.cpp): enough to find call sites, skipping string literals and comments, so that
// a dangerous name inside a string does not count and one outside cannot hide.
#include "audit/torchscript_code.hpp"

#include <algorithm>
#include <array>
#include <set>
#include <string_view>

namespace pthload::audit {
namespace {

// Operations that touch files, processes, storage shared with other processes, or the network,
// by the last part of the called name: torch.from_file and Storage.from_file (maps or creates a
// file, written through with shared=True), the storage-sharing methods of torch/storage.py
// (_share_filename_, _new_shared_filename...), RPC, and names TorchScript never prints but a
// hand-made archive could hold.
constexpr auto kDangerousCallees = std::to_array<std::string_view>({
    "from_file",
    "_share_filename_",
    "_share_fd_",
    "_new_shared_filename",
    "_new_shared_fd",
    "_new_using_filename",
    "_new_using_fd",
    "_new_shared",
    "_share_cuda_",
    "_new_shared_cuda",
    "_release_ipc_counter_cuda",
    "_shared_incref",
    "_shared_decref",
    "share_memory_",
    "rpc_async",
    "rpc_sync",
    "rpc_remote",
    "system",
    "popen",
    "load_library",
    "__import__",
    "eval",
    "exec",
    "compile",
});
// Whole names that are dangerous where their last part alone is too common to judge.
constexpr auto kDangerousQualified = std::to_array<std::string_view>({
    "torch.save",
    "ops.aten.save",
    "torch.load",
    "torch.jit.load",
    "open",
    "ops.prim.remote",
    "torch.distributed.rpc.remote",
});
// Words that a '(' may follow without a call.
constexpr auto kKeywords = std::to_array<std::string_view>({
    "if",     "elif",   "while", "for",    "in",     "not",      "and",   "or",   "is",
    "return", "assert", "with",  "lambda", "yield",  "del",      "raise", "else", "def",
    "class",  "import", "from",  "as",     "global", "nonlocal", "await",
});

constexpr auto kDangerousOperators = std::to_array<std::string_view>({
    "aten::from_file",
    "aten::save",
    "aten::_share_filename_",
    "aten::_new_shared_filename",
    "prim::rpc_async",
    "prim::rpc_sync",
    "prim::rpc_remote",
});

bool is_identifier_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_identifier_char(char c) {
  return is_identifier_start(c) || (c >= '0' && c <= '9');
}

bool dangerous(std::string_view name) {
  const std::size_t dot = name.rfind('.');
  const std::string_view last = dot == std::string_view::npos ? name : name.substr(dot + 1);
  return std::find(kDangerousCallees.begin(), kDangerousCallees.end(), last) !=
             kDangerousCallees.end() ||
         std::find(kDangerousQualified.begin(), kDangerousQualified.end(), name) !=
             kDangerousQualified.end();
}

}  // namespace

CodeCalls torchscript_calls(std::span<const std::byte> source) {
  const std::string_view text(reinterpret_cast<const char*>(source.data()), source.size());
  std::set<std::string> calls;
  CodeCalls result;
  std::string_view previous_word;  // the identifier path before the current one
  std::size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '#') {
      const std::size_t end = text.find('\n', i);
      i = end == std::string_view::npos ? text.size() : end;
      continue;
    }
    if (c == '\'' || c == '"') {
      // A string literal, single- or triple-quoted, with backslash escapes.
      const bool triple = text.substr(i, 3) == std::string(3, c);
      const std::size_t quote = triple ? 3 : 1;
      std::size_t j = i + quote;
      while (j < text.size()) {
        if (text[j] == '\\') {
          j += 2;
          continue;
        }
        if (text.substr(j, quote) == std::string(quote, c)) break;
        if (!triple && text[j] == '\n') break;
        ++j;
      }
      i = std::min(text.size(), j + quote);
      previous_word = {};
      continue;
    }
    if (is_identifier_start(c)) {
      const bool method = i > 0 && text[i - 1] == '.';
      std::size_t j = i;
      // An identifier path: name(.name)*
      for (;;) {
        while (j < text.size() && is_identifier_char(text[j]))
          ++j;
        if (j + 1 < text.size() && text[j] == '.' && is_identifier_start(text[j + 1])) {
          ++j;
          continue;
        }
        break;
      }
      const std::string_view word = text.substr(i, j - i);
      std::size_t k = j;
      while (k < text.size() && (text[k] == ' ' || text[k] == '\t'))
        ++k;
      const bool is_definition = previous_word == "def" || previous_word == "class";
      const bool is_keyword =
          std::find(kKeywords.begin(), kKeywords.end(), word) != kKeywords.end();
      if (k < text.size() && text[k] == '(' && !is_definition && !is_keyword) {
        std::string name = method ? "." + std::string(word) : std::string(word);
        if (dangerous(word)) result.dangerous.push_back(name);
        calls.insert(std::move(name));
      }
      if (previous_word == "def" && word == "__setstate__") result.defines_setstate = true;
      previous_word = word;
      i = j;
      continue;
    }
    if (c != ' ' && c != '\t') previous_word = {};
    ++i;
  }
  result.calls.assign(calls.begin(), calls.end());
  std::sort(result.dangerous.begin(), result.dangerous.end());
  result.dangerous.erase(std::unique(result.dangerous.begin(), result.dangerous.end()),
                         result.dangerous.end());
  return result;
}

std::vector<std::string> dangerous_operator_names(std::span<const std::byte> bytes) {
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  std::vector<std::string> found;
  for (const auto name : kDangerousOperators)
    if (text.find(name) != std::string_view::npos) found.emplace_back(name);
  return found;
}

}  // namespace pthload::audit
