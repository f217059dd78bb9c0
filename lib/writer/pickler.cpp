// Opcodes and their encodings: CPython's Lib/pickle.py (save_long, save_tuple, save_str,
// memoize) at protocol 2, which is what torch.save runs.
#include "writer/pickler.hpp"

#include <utility>

namespace pthload::writer {

Pickler::Pickler() {
  out_ = "\x80\x02";
}

void Pickler::u32(std::uint32_t value) {
  for (int i = 0; i < 4; ++i)
    out_.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

void Pickler::put() {
  const std::uint32_t index = next_memo_++;
  if (index < 256) {
    op('q');
    out_.push_back(static_cast<char>(index));
  } else {
    op('r');
    u32(index);
  }
}

void Pickler::get(std::uint32_t index) {
  if (index < 256) {
    op('h');
    out_.push_back(static_cast<char>(index));
  } else {
    op('j');
    u32(index);
  }
}

void Pickler::global(std::string_view module, std::string_view name) {
  std::string identity = "g\n";
  identity.append(module).append("\n").append(name);
  if (const auto found = shared_.find(identity); found != shared_.end()) {
    get(found->second);
    return;
  }
  op('c');
  out_.append(module).append("\n").append(name).append("\n");
  put();
  shared_.emplace(std::move(identity), last_memo());
}

void Pickler::text(std::string_view text) {
  op('X');
  u32(static_cast<std::uint32_t>(text.size()));
  out_.append(text);
  put();
}

void Pickler::shared_text(std::string_view identity, std::string_view value) {
  std::string key = "t\n";
  key.append(identity);
  if (const auto found = shared_.find(key); found != shared_.end()) {
    get(found->second);
    return;
  }
  text(value);
  shared_.emplace(std::move(key), last_memo());
}

void Pickler::integer(std::int64_t value) {
  if (value >= 0 && value <= 0xff) {
    op('K');
    out_.push_back(static_cast<char>(value));
  } else if (value >= 0 && value <= 0xffff) {
    op('M');
    out_.push_back(static_cast<char>(value & 0xff));
    out_.push_back(static_cast<char>(value >> 8));
  } else if (value >= INT32_MIN && value <= INT32_MAX) {
    op('J');
    u32(static_cast<std::uint32_t>(static_cast<std::int32_t>(value)));
  } else {
    // LONG1: the fewest two's-complement little-endian bytes that keep the sign (encode_long).
    auto bits = static_cast<std::uint64_t>(value);
    std::string bytes;
    for (int i = 0; i < 8; ++i)
      bytes.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
    const char fill = value < 0 ? static_cast<char>(0xff) : 0;
    while (bytes.size() > 1 && bytes.back() == fill &&
           ((bytes[bytes.size() - 2] & 0x80) != 0) == (value < 0)) {
      bytes.pop_back();
    }
    op('\x8a');
    out_.push_back(static_cast<char>(bytes.size()));
    out_.append(bytes);
  }
}

void Pickler::boolean(bool value) {
  op(value ? '\x88' : '\x89');
}

void Pickler::mark() {
  op('(');
}

void Pickler::tuple(std::size_t count) {
  switch (count) {
    case 0:
      op(')');  // CPython memoizes no empty tuple
      return;
    case 1:
      op('\x85');
      break;
    case 2:
      op('\x86');
      break;
    case 3:
      op('\x87');
      break;
    default:
      op('t');
  }
  put();
}

void Pickler::empty_dict() {
  op('}');
  put();
}

void Pickler::setitem() {
  op('s');
}
void Pickler::setitems() {
  op('u');
}

void Pickler::reduce() {
  op('R');
  put();
}

void Pickler::persistent_id() {
  op('Q');
}
void Pickler::stop() {
  op('.');
}

}  // namespace pthload::writer
