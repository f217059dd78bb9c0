// Placing storages on the CPU: zero-copy views of the mapped file, or owned aligned copies.
#pragma once

#include <vector>

#include "checkpoint/state.hpp"
#include "device/cpu/file_copies.hpp"
#include "device/cpu/packed_copies.hpp"

namespace pthload::device {

/// The bytes of `storage`'s record as CPU memory: a view of the mapped file when `copy` is off
/// and the record is stored, suitably aligned and needs no byte swap; otherwise an owned
/// 64-byte aligned buffer (inflated, copied and/or byte-swapped). Sets placement and cpu_bytes.
/// With `deferred`, a plain copy from the file (no inflation, no byte swap) is not read here:
/// the buffer is allocated and placed, and the read appended to `deferred` for
/// cpu::read_copies; returns whether it was (the storage's bytes are not there until then).
/// With `packed` too, the buffer of a small storage is a piece of its block where it has room.
bool place_on_cpu(const internal::CheckpointState& checkpoint, internal::StorageState& storage,
                  bool copy, cpu::FileCopyList* deferred = nullptr,
                  cpu::PackedCopies* packed = nullptr);

/// Places `storage` as a view of its file where that reads none of its bytes: a stored record
/// (or a legacy range) whose address suits its elements and that needs no byte swap, in a file
/// that maps it. Returns whether it did; otherwise nothing changed, and place_on_cpu copies it.
/// Throws as Archive::read does for a stored record it cannot read (out of bounds, encrypted).
bool place_view_on_cpu(const internal::CheckpointState& checkpoint,
                       internal::StorageState& storage);

/// The storage's bytes in host memory as the file stores them (not byte-swapped), for a copy
/// to another device: a view of the file, or a buffer kept in `scratch` (an inflated record).
[[nodiscard]] std::span<const std::byte> stored_bytes(const internal::CheckpointState& checkpoint,
                                                      const internal::StorageState& storage,
                                                      common::AlignedBuffer& scratch);

/// The file `storage`'s bytes are in: the checkpoint's, a shard's, or a nested legacy stream's.
/// Copies of its bytes go through its copy_out() (pread for files). Valid while `checkpoint` is.
[[nodiscard]] const common::MappedFile& storage_file(const internal::CheckpointState& checkpoint,
                                                     const internal::StorageState& storage);

/// The alignment a view of `storage` needs: its elements' size (at most 16; 16 for an untyped
/// storage, which may hold any dtype).
[[nodiscard]] std::size_t view_alignment(const internal::StorageState& storage) noexcept;

}  // namespace pthload::device
