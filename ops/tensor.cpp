#include "ops/tensor.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "ops/backend.h"
#include "ops/cpu/huge_pages.h"
#include "ops/error.h"
#include "ops/memory_account.h"
#include "ops/mx_tensor.h"

namespace tensord {

std::string TensorMeta::str() const {
  if (mx) return mx_meta_str(*mx);
  return std::string(dtype_name(dtype)) + shape_str(shape);
}

size_t TensorMeta::mx_nbytes() const {
  return mx->nbytes();
}

std::shared_ptr<Storage> Storage::host(size_t bytes) {
  auto s = std::shared_ptr<Storage>(new Storage());
  size_t rounded = (bytes + 63) / 64 * 64;
  if (rounded == 0) rounded = 64;
  s->ptr_ = std::aligned_alloc(64, rounded);
  if (!s->ptr_)
    throw Error(ErrorCode::kQuotaExceeded, "host out of memory allocating " + std::to_string(bytes) + " bytes");
  advise_huge_pages(s->ptr_, rounded);  // a decoded upload's pages fault in 2 MiB at a time
  s->bytes_ = bytes;
  return s;
}

std::shared_ptr<Storage> Storage::allocate(Backend* backend, Device d, size_t bytes,
                                           std::shared_ptr<MemoryAccount> account) {
  if (account) account->charge(static_cast<int64_t>(bytes));
  auto s = std::shared_ptr<Storage>(new Storage());
  s->account_ = std::move(account);
  s->bytes_ = bytes;
  s->device_ = d;
  s->backend_ = backend;
  try {
    s->ptr_ = backend->allocate(d, bytes);
  } catch (...) {
    s->backend_ = nullptr;  // nothing to free
    throw;                  // destructor releases the charge
  }
  return s;
}

std::shared_ptr<Storage> Storage::wrap(void* p, size_t bytes, std::shared_ptr<const void> owner, size_t owner_bytes) {
  TENSORD_ASSERT(owner != nullptr);
  auto s = std::shared_ptr<Storage>(new Storage());
  s->ptr_ = p;
  s->bytes_ = bytes;
  s->owner_ = std::move(owner);
  s->owner_bytes_ = owner_bytes;
  return s;
}

Storage::~Storage() {
  if (ptr_ && !owner_) {
    if (backend_) {
      backend_->deallocate(device_, ptr_, bytes_);
    } else {
      std::free(ptr_);
    }
  }
  if (account_) account_->release(static_cast<int64_t>(bytes_));
}

void Storage::charge(std::shared_ptr<MemoryAccount> account, bool enforce) {
  if (account == account_) return;
  if (account) account->charge(static_cast<int64_t>(bytes_), enforce);
  if (account_) account_->release(static_cast<int64_t>(bytes_));
  account_ = std::move(account);
}

Tensor::Tensor(TensorMeta meta, std::shared_ptr<Storage> storage, size_t byte_offset)
    : meta_(std::move(meta)), storage_(std::move(storage)), offset_(byte_offset) {
  numel_ = shape_numel(meta_.shape);
  nbytes_ = meta_.nbytes();
  TENSORD_ASSERT(!storage_ || offset_ + nbytes() <= storage_->nbytes());
}

Tensor Tensor::empty_host(DType dtype, Shape shape) {
  return empty_host(TensorMeta{dtype, std::move(shape)});
}

Tensor Tensor::empty_host(TensorMeta m) {
  m.wrapped_number = false;
  size_t bytes = m.nbytes();
  return Tensor(std::move(m), Storage::host(bytes));
}

Tensor Tensor::zeros_host(DType dtype, Shape shape) {
  Tensor t = empty_host(dtype, std::move(shape));
  std::memset(t.data(), 0, t.nbytes());
  return t;
}

Tensor Tensor::empty(Backend* backend, Device d, DType dtype, Shape shape, std::shared_ptr<MemoryAccount> account) {
  return empty(backend, d, TensorMeta{dtype, std::move(shape)}, std::move(account));
}

Tensor Tensor::empty(Backend* backend, Device d, TensorMeta m, std::shared_ptr<MemoryAccount> account) {
  m.wrapped_number = false;
  size_t bytes = m.nbytes();
  return Tensor(std::move(m), Storage::allocate(backend, d, bytes, std::move(account)));
}

Device Tensor::device() const {
  return storage_ ? storage_->device() : Device{};
}

Tensor Tensor::view(Shape shape) const {
  TENSORD_ASSERT(!meta_.mx);
  TensorMeta m{meta_.dtype, std::move(shape)};
  TENSORD_ASSERT(shape_numel(m.shape) == numel_);
  return Tensor(std::move(m), storage_, offset_);
}

Tensor Tensor::clone_host() const {
  TENSORD_ASSERT(on_host());
  Tensor t = empty_host(meta_);
  if (nbytes()) std::memcpy(t.data(), data(), nbytes());
  return t;
}

Tensor Tensor::to_host() const {
  if (on_host()) return *this;
  Tensor t = empty_host(meta_);
  if (nbytes()) storage_->backend()->copy_to_host(device(), t.data(), data(), nbytes());
  return t;
}

Tensor Tensor::to_device(Backend* backend, Device d, std::shared_ptr<MemoryAccount> account) const {
  if (device() == d && storage_->backend() == backend) return *this;
  if (!on_host()) return to_host().to_device(backend, d, std::move(account));
  Tensor t = empty(backend, d, meta_, std::move(account));
  if (nbytes()) backend->copy_to_device(d, t.data(), data(), nbytes());
  return t;
}

Tensor Tensor::clone() const {
  if (on_host()) return clone_host();
  Backend* b = storage_->backend();
  Tensor t = empty(b, device(), meta_, nullptr);
  if (nbytes()) {
    const Stream s{device(), 0};
    b->copy_on_device(s, t.data(), data(), nbytes());
    b->synchronize(s);
  }
  return t;
}

}  // namespace tensord
