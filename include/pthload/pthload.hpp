// pthload: read PyTorch checkpoints without PyTorch or Python. The umbrella header.
//
// Threads. pthload keeps no global state but the fault injection hooks of its tests, the
// registry of live byte holds (Tensor::hold_bytes, which has its own lock), and settings read
// once and never changed: the environment variable PTHLOAD_HUGE_PAGES (=1: memory a load fills
// in blocks of 2 MiB or more is advised MADV_HUGEPAGE; off by default: docs/performance.md, "The
// memory policy") and constant tables built at first use. Nothing depends on timing or on what
// ran before, so:
// - load() and open() may run on any number of threads at once, of one file or of many.
// - A loaded Checkpoint, and the Tensors and Storages it hands out, may be read from many threads
//   at once without locking: every const member function only reads. Tensor copies share their
//   Storage through std::shared_ptr, whose count is atomic, so they may move between threads.
// - A Checkpoint must not be changed (Checkpoint::to(), a load into it, assignment, destruction)
//   while any other thread uses it or its bytes: the caller serialises those. Holds on bytes
//   (Tensor::hold_bytes, DLPack exports) are the exception: any thread may release one at any
//   time, during to() too, and the bytes a hold pins stay valid however the Checkpoint changes.
// - open() and load() use threads of their own, joined before they return: one rebuilding the
//   tensors of a large pickle while it runs (LoadOptions::parse_threads), readers of copies
//   (LoadOptions::copy_threads) and of GPU staging (CudaOptions::reader_threads).
// The `threads` test suite checks these rules under ThreadSanitizer in CI.
//
// Files that change. LoadOptions::io says how bytes are read. With the default (a mapping for
// views), the structure (index, pickles), copies — owned CPU copies, CUDA staging, conversions —
// and the library's own reads of views (checksums, CRC checks, Storage::read) use pread, so a
// file truncated during them gives IoError; a zero-copy view stays a view of the mapping, and
// the caller touching it after the file was truncated raises SIGBUS, as with
// torch.load(mmap=True) and safetensors. load() refuses (IoError kIoFileChanged) a file written or
// truncated between open() and placement. With IoStrategy::kRead the file is never mapped: no
// truncation at any point of a load can raise a signal.
#pragma once

#include "pthload/checkpoint.hpp"
#include "pthload/device.hpp"
#include "pthload/dtype.hpp"
#include "pthload/error.hpp"
#include "pthload/inspect.hpp"
#include "pthload/limits.hpp"
#include "pthload/options.hpp"
#include "pthload/records.hpp"
#include "pthload/save.hpp"
#include "pthload/scan.hpp"
#include "pthload/slice.hpp"
#include "pthload/tensor.hpp"
