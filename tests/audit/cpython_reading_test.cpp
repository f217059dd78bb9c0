// read_as_cpython(): CPython's C unpickler reading through io.BytesIO, checked against what
// CPython 3.11.7 did with each pickle (the C unpickler over a BytesIO; experiments recorded in the
// issue-56 note): which bytes it takes for an operand when a FRAME ends inside the operand.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "audit/cpython_reading.hpp"
#include "support/bytes.hpp"

namespace {

using pthload::audit::read_as_cpython;
using pthload::test::bytes_of;
using pthload::test::text_of;

// PROTO 4, then FRAME with `length` (which may lie about what follows).
std::string framed(std::uint64_t length) {
  std::string out = "\x80\x04\x95";
  for (int i = 0; i < 8; ++i)
    out += static_cast<char>((length >> (8 * i)) & 0xff);
  return out;
}

}  // namespace

TEST_CASE("cpython reading: a pickle without frames, or with whole ones, reads straight through") {
  const auto plain = read_as_cpython(bytes_of("\x80\x02}q\x00."));
  CHECK(!plain.divergence);
  CHECK(plain.bytes.empty());
  const std::string whole = framed(2) + "}.";
  const auto framed_whole = read_as_cpython(bytes_of(whole));
  CHECK(!framed_whole.divergence);
  CHECK(!framed_whole.nested_frame);
}

TEST_CASE("cpython reading: a fixed-size operand past the frame is taken from after it") {
  // FRAME 3 + "J\x01\x02" + "\x03\x04\x05\x06.": CPython's BININT is 0x06050403.
  const std::string input = framed(3) + "J\x01\x02" + "\x03\x04\x05\x06.";
  const auto reading = read_as_cpython(bytes_of(input));
  REQUIRE(reading.divergence);
  CHECK(*reading.divergence == 11);  // the BININT
  CHECK(text_of(reading.bytes) == std::string("\x80\x04J\x03\x04\x05\x06.", 8));
  CHECK(reading.input_offset(2) == 11);  // the J came from the frame
  CHECK(reading.input_offset(3) == 14);  // its operand from after it
  CHECK(reading.divergence_reason.find("BININT") != std::string::npos);
}

TEST_CASE("cpython reading: a GLOBAL's lines past the frame are read from after it") {
  // FRAME 3 + "cos" + "builtins\nrepr\n.": CPython imports builtins.repr.
  const std::string input = framed(3) + "cos" + "builtins\nrepr\n.";
  const auto reading = read_as_cpython(bytes_of(input));
  REQUIRE(reading.divergence);
  CHECK(text_of(reading.bytes) ==
        "\x80\x04"
        "cbuiltins\nrepr\n.");
}

TEST_CASE("cpython reading: a STRING line and a counted string past the frame") {
  const std::string string_input = framed(4) + "S'ab" + "'cd'\n.";
  CHECK(text_of(read_as_cpython(bytes_of(string_input)).bytes) == "\x80\x04S'cd'\n.");
  // SHORT_BINUNICODE: the length byte in the frame, the text after it.
  const std::string counted = framed(4) +
                              "\x8c\x05"
                              "ab" +
                              "cdefg.";
  CHECK(text_of(read_as_cpython(bytes_of(counted)).bytes) ==
        "\x80\x04\x8c\x05"
        "cdefg.");
}

TEST_CASE("cpython reading: a bytes payload reads straight through the frame's end") {
  // BINBYTES copies its payload with readinto: b'abcde', as pickletools reads it.
  const std::string input = framed(7) +
                            std::string(
                                "B\x05\x00\x00\x00"
                                "ab",
                                7) +
                            "cde.";
  const auto reading = read_as_cpython(bytes_of(input));
  CHECK(!reading.divergence);
}

TEST_CASE("cpython reading: a frame inside a frame") {
  // FRAME 11 holding "N", FRAME 5 and "K"; the inner frame does not fit in what is left of the
  // outer one, so "K" is dropped and the inner frame read from after the outer: CPython returns 7.
  std::string inner = "\x95";
  inner += std::string("\x05\x00\x00\x00\x00\x00\x00\x00", 8);
  const std::string input = framed(11) + "N" + inner + "K" +
                            "K\x05"
                            "0K\x07.";
  const auto reading = read_as_cpython(bytes_of(input));
  REQUIRE(reading.divergence);
  REQUIRE(reading.nested_frame);
  CHECK(*reading.nested_frame == 12);
  CHECK(text_of(reading.bytes) ==
        "\x80\x04NK\x05"
        "0K\x07.");

  // A nested frame that fits is read on by the C unpickler (pickle.py refuses it).
  std::string fitting = "\x95";
  fitting += std::string("\x01\x00\x00\x00\x00\x00\x00\x00", 8);
  const std::string nested_input = framed(11) + "N" + fitting + "N" + "0.";
  const auto nested = read_as_cpython(bytes_of(nested_input));
  CHECK(!nested.divergence);
  CHECK(nested.nested_frame);
}

TEST_CASE("cpython reading: reads that fail stop the model where CPython raises") {
  // The frame claims more than the file holds.
  const auto truncated = read_as_cpython(bytes_of(framed(100) + "N."));
  CHECK(!truncated.divergence);
  // A GLOBAL line past the frame with no newline after it.
  const std::string no_line = framed(3) + "cos" + "builtins";
  const auto reading = read_as_cpython(bytes_of(no_line));
  REQUIRE(reading.divergence);
  CHECK(text_of(reading.bytes) ==
        "\x80\x04"
        "c");
}
