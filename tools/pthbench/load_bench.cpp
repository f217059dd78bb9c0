// `pthbench load FILE`: open (structure only), a zero-copy load, a copy-mode load, and the
// reference they are measured against: reading the whole file once into memory, in this process.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench.hpp"
#include "pthload/checkpoint.hpp"

namespace pthbench {
namespace {

// What "reading the file once" costs: open, one buffer of the file's size, read() to the end.
std::size_t read_whole_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot open " + path);
  const off_t size = ::lseek(fd, 0, SEEK_END);
  ::lseek(fd, 0, SEEK_SET);
  auto buffer = std::make_unique_for_overwrite<char[]>(static_cast<std::size_t>(size));
  std::size_t done = 0;
  while (done < static_cast<std::size_t>(size)) {
    const ssize_t got = ::read(fd, buffer.get() + done, static_cast<std::size_t>(size) - done);
    if (got <= 0) break;
    done += static_cast<std::size_t>(got);
  }
  ::close(fd);
  return done;
}

}  // namespace

int bench_load(const Options& options) {
  for (const auto& file : options.files) {
    std::size_t file_bytes = 0;
    std::size_t tensors = 0;
    report("read", file, 0,
           time_runs(options.repetitions, [&] { file_bytes = read_whole_file(file); }));
    report("open", file, file_bytes,
           time_runs(options.repetitions, [&] { tensors = pthload::open(file).tensors().size(); }));
    const auto cpu = pthload::map_to("cpu");
    report("view", file, file_bytes, time_runs(options.repetitions, [&] {
             (void)pthload::load(file, {.map_location = cpu});
           }));
    report("copy", file, file_bytes, time_runs(options.repetitions, [&] {
             (void)pthload::load(file, {.map_location = cpu, .copy_cpu_storages = true});
           }));
    std::printf("%zu tensors\n", tensors);
  }
  return 0;
}

}  // namespace pthbench
