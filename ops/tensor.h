// Tensor: dtype + shape over contiguous storage on one device.
// Storage is shared (reshape is a view); writes go through ops that own
// their output or through the commit protocol of graphs/ for stored tensors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "ops/device.h"
#include "ops/dtype.h"
#include "ops/shape.h"

namespace tensord {

class Backend;
class MemoryAccount;
struct MxMeta;  // ops/mx_tensor.h

// What shape inference knows about a value.
struct TensorMeta {
  DType dtype = DType::kFloat32;
  Shape shape;
  // A Python number passed where a tensor goes (add(x, 2.0)): promotes with
  // PyTorch's "wrapped number" priority.
  bool wrapped_number = false;
  // Set for an MX tensor (ops/mx_tensor.h): `shape` is then the logical
  // shape, `dtype` uint8, and the bytes are the packed elements followed by
  // the e8m0 scales (nbytes() counts both).
  std::shared_ptr<const MxMeta> mx = nullptr;

  int64_t numel() const { return shape_numel(shape); }
  size_t nbytes() const { return mx ? mx_nbytes() : static_cast<size_t>(numel()) * dtype_size(dtype); }
  int64_t dim() const { return static_cast<int64_t>(shape.size()); }
  std::string str() const;  // "float32[2, 3]", "mxfp4_e2m1[4, 64] (block_size 32, axis -1)"

 private:
  size_t mx_nbytes() const;
};

// A block of device memory. Frees itself through its backend (or the host
// heap when backend is null) and releases any bytes charged to an account.
class Storage {
 public:
  // Host heap memory, 64-byte aligned, not charged to anyone.
  static std::shared_ptr<Storage> host(size_t bytes);
  // Device memory from `backend`, charged to `account` (may be null).
  static std::shared_ptr<Storage> allocate(Backend* backend, Device d, size_t bytes,
                                           std::shared_ptr<MemoryAccount> account);
  // Host memory owned by someone else (e.g. a request body a safetensors
  // tensor aliases): never freed here; `owner` is kept alive as long as the
  // storage is.
  // `owner_bytes`: the size of the owner's buffer, when known (0: unknown).
  static std::shared_ptr<Storage> wrap(void* p, size_t bytes, std::shared_ptr<const void> owner,
                                       size_t owner_bytes = 0);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return ptr_; }
  size_t nbytes() const { return bytes_; }
  Device device() const { return device_; }
  Backend* backend() const { return backend_; }

  // Charges the storage's bytes to `account` (throws quota_exceeded, nothing
  // changed); a storage is charged to at most one account at a time.
  // enforce = false: past the quota (MemoryAccount::charge).
  void charge(std::shared_ptr<MemoryAccount> account, bool enforce = true);
  const std::shared_ptr<MemoryAccount>& account() const { return account_; }
  // True for wrap()ped memory: a view into a buffer someone else owns (a
  // request body), which must be copied before it is kept.
  bool borrowed() const { return owner_ != nullptr; }
  // A wrapped view that is the only user of its owner's buffer, which is at
  // most `max_slack` bytes larger than the view (a one-tensor request body:
  // its header): it can be kept instead of copied, as good as owned.
  bool sole_view(size_t max_slack) const {
    return owner_ && owner_.use_count() == 1 && owner_bytes_ >= bytes_ && owner_bytes_ - bytes_ <= max_slack;
  }

 private:
  Storage() = default;
  Backend* backend_ = nullptr;
  Device device_{};
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  std::shared_ptr<MemoryAccount> account_;
  std::shared_ptr<const void> owner_;  // set by wrap(): ptr_ is not ours to free
  size_t owner_bytes_ = 0;             // the owner's buffer size (wrap), 0 when unknown
};

class Tensor {
 public:
  Tensor() = default;
  Tensor(TensorMeta meta, std::shared_ptr<Storage> storage, size_t byte_offset = 0);

  // Uninitialised host tensor.
  static Tensor empty_host(DType dtype, Shape shape);
  // Zero-filled host tensor.
  static Tensor zeros_host(DType dtype, Shape shape);
  // Uninitialised tensor on a backend device, charged to `account`.
  static Tensor empty(Backend* backend, Device d, DType dtype, Shape shape, std::shared_ptr<MemoryAccount> account);
  // The same for any meta (an MX tensor's included: its nbytes()).
  static Tensor empty_host(TensorMeta m);
  static Tensor empty(Backend* backend, Device d, TensorMeta m, std::shared_ptr<MemoryAccount> account);

  bool defined() const { return storage_ != nullptr; }
  const TensorMeta& meta() const { return meta_; }
  DType dtype() const { return meta_.dtype; }
  const Shape& shape() const { return meta_.shape; }
  int64_t dim() const { return meta_.dim(); }
  int64_t numel() const { return numel_; }
  // An MX tensor's packed bytes (elements and scales; ops/mx_tensor.h).
  size_t nbytes() const { return nbytes_; }
  bool is_mx() const { return meta_.mx != nullptr; }
  size_t byte_offset() const { return offset_; }
  Device device() const;

  void* data() const { return static_cast<char*>(storage_->data()) + offset_; }
  template <class T>
  T* data_ptr() const {
    return static_cast<T*>(data());
  }
  const std::shared_ptr<Storage>& storage() const { return storage_; }

  // A view with another shape of the same numel (no copy; not of an MX tensor).
  Tensor view(Shape shape) const;
  // A deep copy into fresh host memory (CPU tensors only).
  Tensor clone_host() const;
  // True when the bytes are host memory (the CPU device).
  bool on_host() const { return device().type == DeviceType::kCPU; }
  // The same values in host memory: this tensor when it is there already,
  // else a copy through its backend (not charged to anyone).
  Tensor to_host() const;
  // The same values on device `d` of `backend`, charged to `account`: this
  // tensor when it is there already, else a copy (through the host when it
  // lives on another device).
  Tensor to_device(Backend* backend, Device d, std::shared_ptr<MemoryAccount> account) const;
  // A deep copy on the tensor's own device (host or device), uncharged.
  Tensor clone() const;
  // Marks as a wrapped Python number for type promotion.
  Tensor& set_wrapped_number(bool w) {
    meta_.wrapped_number = w;
    return *this;
  }

 private:
  TensorMeta meta_;
  int64_t numel_ = 0;
  size_t nbytes_ = 0;
  std::shared_ptr<Storage> storage_;
  size_t offset_ = 0;
};

}  // namespace tensord
