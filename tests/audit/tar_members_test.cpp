// read_tar_members(): tar headers as Python's tarfile reads them, on archives written here
// block by block (ustar, a GNU long name, a PAX path, a bad checksum).
#include <doctest/doctest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "audit/tar_members.hpp"

namespace {

using pthload::audit::read_tar_members;

// A 512-byte header for `name` of `size` bytes, typeflag `type`, with its checksum.
std::string header(const std::string& name, std::size_t size, char type = '0',
                   const std::string& prefix = "") {
  std::string block(512, '\0');
  block.replace(0, std::min<std::size_t>(name.size(), 100), name.substr(0, 100));
  char octal[16];
  std::snprintf(octal, sizeof octal, "%011zo", size);
  block.replace(124, 11, octal);
  block[156] = type;
  block.replace(257, 6, std::string("ustar\0", 6));
  block.replace(263, 2, "00");
  block.replace(345, prefix.size(), prefix);
  block.replace(148, 8, "        ");
  unsigned sum = 0;
  for (const char c : block)
    sum += static_cast<unsigned char>(c);
  std::snprintf(octal, sizeof octal, "%06o", sum);
  block.replace(148, 6, octal);
  block[154] = '\0';
  return block;
}

std::string member(const std::string& name, const std::string& data, char type = '0',
                   const std::string& prefix = "") {
  std::string out = header(name, data.size(), type, prefix) + data;
  out.resize((out.size() + 511) / 512 * 512, '\0');
  return out;
}

std::vector<pthload::audit::TarMember> members_of(const std::string& archive,
                                                  std::string& problem) {
  const auto members =
      read_tar_members(std::as_bytes(std::span(archive.data(), archive.size())), problem);
  REQUIRE(members);
  return *members;
}

}  // namespace

TEST_CASE("tar: members, their data, and the end-of-archive block") {
  const std::string archive =
      member("storages", "abc") + member("pickle", "\x80\x02}.") + std::string(1024, '\0');
  std::string problem;
  const auto members = members_of(archive, problem);
  REQUIRE(members.size() == 2);
  CHECK(members[0].name == "storages");
  CHECK(members[0].offset == 512);
  CHECK(members[0].size == 3);
  CHECK(members[1].name == "pickle");
  CHECK(members[1].offset == 1536);
  CHECK(problem.empty());
}

TEST_CASE("tar: long names from GNU and PAX headers, and ustar's prefix") {
  const std::string long_name(150, 'n');
  std::string problem;
  const auto gnu =
      members_of(member("././@LongLink", long_name, 'L') + member("short", "x"), problem);
  REQUIRE(gnu.size() == 1);
  CHECK(gnu[0].name == long_name);
  const std::string record = "15 path=pickle\n";
  const auto pax = members_of(member("PaxHeader", record, 'x') + member("other", "x"), problem);
  REQUIRE(pax.size() == 1);
  CHECK(pax[0].name == "pickle");
  const auto prefixed = members_of(member("pickle", "x", '0', "dir"), problem);
  REQUIRE(prefixed.size() == 1);
  CHECK(prefixed[0].name == "dir/pickle");
}

TEST_CASE("tar: what tarfile refuses") {
  std::string problem;
  // Not a tar: a bad first checksum, zeros, a short file.
  std::string bad = member("pickle", "x");
  bad[0] = 'q';
  CHECK(!read_tar_members(std::as_bytes(std::span(bad.data(), bad.size())), problem));
  const std::string zeros(1024, '\0');
  CHECK(!read_tar_members(std::as_bytes(std::span(zeros.data(), zeros.size())), problem));
  CHECK(!pthload::audit::looks_like_tar(std::as_bytes(std::span(bad.data(), 100))));
  // A member claiming more than the file holds ends the listing with a problem.
  std::string claims = header("pickle", 1'000'000) + std::string(512, 'x');
  const auto members = members_of(member("first", "x") + claims, problem);
  CHECK(members.size() == 1);
  CHECK(problem.find("past the end") != std::string::npos);
}
