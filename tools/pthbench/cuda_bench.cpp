// `pthbench cuda FILE`: file → GPU through pthload's pipeline, beside the ceiling measured in
// the same run (one pinned host buffer copied to the device: what PCIe allows), loading to the
// CPU then Checkpoint::to, and torch.load / safetensors through Python when PTHBENCH_PYTHON names
// one with torch. Without a GPU the same pipeline runs on the host backend (memcpy standing in
// for the copies): host figures, said so, for checking the pipeline, not for the GPU targets.
// Knobs for tuning on a GPU machine: PTHBENCH_STAGING_BUFFERS, PTHBENCH_STAGING_BYTES,
// PTHBENCH_READER_THREADS, PTHBENCH_ARENA_BYTES (CudaOptions' fields).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "bench.hpp"
#include "checkpoint/state.hpp"
#include "device/backend.hpp"
#include "device/host_backend.hpp"
#include "device/place.hpp"
#include "pthload/checkpoint.hpp"

namespace pthbench {
namespace {

std::uint64_t env_or(const char* name, std::uint64_t fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? std::strtoull(value, nullptr, 10) : fallback;
}

pthload::CudaOptions cuda_options() {
  pthload::CudaOptions options;
  options.staging_buffers = env_or("PTHBENCH_STAGING_BUFFERS", options.staging_buffers);
  options.staging_buffer_bytes = env_or("PTHBENCH_STAGING_BYTES", options.staging_buffer_bytes);
  options.reader_threads =
      static_cast<unsigned>(env_or("PTHBENCH_READER_THREADS", options.reader_threads));
  options.arena_storage_bytes = env_or("PTHBENCH_ARENA_BYTES", options.arena_storage_bytes);
  options.arena_max_bytes = env_or("PTHBENCH_ARENA_MAX_BYTES", options.arena_max_bytes);
  return options;
}

void line(const char* name, const std::string& file, std::uint64_t bytes,
          const std::vector<double>& ms, double ceiling_gbps) {
  const double median = ms[ms.size() / 2];
  const double gbps = static_cast<double>(bytes) / 1e9 / (median / 1e3);
  std::printf("%-22s %s: %llu bytes, median %.3f ms, min %.3f ms, %.2f GB/s, %.0f%% of ceiling\n",
              name, file.c_str(), static_cast<unsigned long long>(bytes), median, ms.front(), gbps,
              100.0 * gbps / ceiling_gbps);
}

// One pinned buffer holding the file's first bytes (up to 1 GiB), copied to the device whole.
double measure_ceiling(pthload::device::Backend& backend, const std::string& file,
                       std::uint64_t bytes, int repetitions) {
  const std::size_t size = static_cast<std::size_t>(std::min<std::uint64_t>(bytes, 1ull << 30));
  backend.use_device(0);
  auto* staging = static_cast<char*>(backend.allocate_staging(size));
  const auto contents = read_file(file);
  std::memcpy(staging, contents.data(), std::min(size, contents.size()));
  void* device = backend.allocate(0, size);
  auto* stream = backend.create_stream(0);
  const auto ms = time_runs(repetitions, [&] {
    backend.copy_to_device(device, staging, size, stream);
    backend.synchronize(stream);
  });
  backend.destroy_stream(stream);
  backend.free(0, device);
  backend.free_staging(staging);
  const double gbps = static_cast<double>(size) / 1e9 / (ms[ms.size() / 2] / 1e3);
  std::printf("%-22s %s: %zu bytes, median %.3f ms, %.2f GB/s\n", "pinned ceiling", file.c_str(),
              size, ms[ms.size() / 2], gbps);
  return gbps;
}

// torch.load (mmap and not) and safetensors, timed inside Python (in-process, as pthload is).
void python_references(const std::string& file) {
  const char* python = std::getenv("PTHBENCH_PYTHON");
  if (python == nullptr || *python == '\0') {
    std::printf("(set PTHBENCH_PYTHON to a Python with torch for torch.load / safetensors)\n");
    return;
  }
  const std::string script = R"PY(
import statistics, sys, time, torch
path = sys.argv[1]
def run(name, body):
    body(); torch.cuda.synchronize()
    ms = []
    for _ in range(5):
        t = time.perf_counter(); body(); torch.cuda.synchronize()
        ms.append((time.perf_counter() - t) * 1e3)
    print(f"{name:<22} {path}: median {statistics.median(ms):.3f} ms, min {min(ms):.3f} ms")
if path.endswith(".safetensors"):
    from safetensors.torch import load_file
    run("safetensors load_file", lambda: load_file(path, device="cuda:0"))
else:
    run("torch.load mmap", lambda: torch.load(path, mmap=True, map_location="cuda:0", weights_only=False))
    run("torch.load", lambda: torch.load(path, map_location="cuda:0", weights_only=False))
)PY";
  const std::string command = std::string(python) + " -c '" + script + "' '" + file + "'";
  if (std::system(command.c_str()) != 0) std::printf("(the Python references failed)\n");
}

}  // namespace

int bench_cuda(const Options& options) {
  std::shared_ptr<pthload::device::Backend> backend = pthload::device::cuda_backend();
  const bool gpu = backend && backend->device_count() > 0;
  if (!gpu) {
    std::printf(
        "no CUDA device: the pipeline runs on the host backend (memcpy for copies); "
        "these are host figures, not GPU ones\n");
    backend = std::make_shared<pthload::device::HostBackend>();
  }
  const pthload::CudaOptions cuda = cuda_options();
  for (const auto& file : options.files) {
    std::uint64_t bytes = 0;
    std::size_t storages = 0;
    {
      const auto opened = pthload::open(file);
      for (const auto& storage : opened.storages())
        bytes += storage->nbytes();
      storages = opened.storages().size();
    }
    std::printf(
        "%s: %zu storages, %llu bytes; staging %zu x %zu bytes, %u reader threads "
        "(0: automatic), arenas below %llu bytes\n",
        file.c_str(), storages, static_cast<unsigned long long>(bytes), cuda.staging_buffers,
        cuda.staging_buffer_bytes, cuda.reader_threads,
        static_cast<unsigned long long>(cuda.arena_storage_bytes));
    const double ceiling = measure_ceiling(*backend, file, bytes, options.repetitions);
    pthload::LoadOptions to_gpu{.map_location = pthload::map_to(pthload::Device::cuda(0))};
    to_gpu.cuda = cuda;
    pthload::device::PipelineReport layout;
    line("load to cuda:0", file, bytes,
         time_runs(options.repetitions,
                   [&] {
                     auto checkpoint = pthload::open(file, to_gpu);
                     pthload::device::place_storages(checkpoint, to_gpu, backend, &layout);
                   }),
         ceiling);
    std::printf("  %zu allocations (%zu arenas), %zu copies, %zu staging bytes, %u readers\n",
                layout.allocations, layout.arenas, layout.copies, layout.staging_bytes,
                layout.reader_threads);
    std::printf(
        "  last run: device allocations %.1f ms, staging %.1f ms, copies %.1f ms, "
        "finish %.1f ms\n",
        layout.allocate_ms, layout.staging_ms, layout.copy_ms, layout.finish_ms);
    line("load cpu, then to()", file, bytes,
         time_runs(
             options.repetitions,
             [&] {
               auto checkpoint = pthload::load(file, {.map_location = pthload::map_to("cpu")});
               pthload::device::move_storages(checkpoint, pthload::Device::cuda(0), cuda, backend);
             }),
         ceiling);
    line("load to cpu (views)", file, bytes,
         time_runs(options.repetitions,
                   [&] { (void)pthload::load(file, {.map_location = pthload::map_to("cpu")}); }),
         ceiling);
    if (gpu) python_references(file);
  }
  return 0;
}

}  // namespace pthbench
