// A job's writes to stored tensors, buffered until it commits (API.md 4:
// writes commit only if the whole program succeeds). Reads see the job's
// own earlier writes, else the tenant's stored value. Used from one job
// thread at a time.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ops/op_registry.h"

namespace tensord {

class PendingStore final : public StoredIO {
 public:
  using Reader = std::function<std::optional<Tensor>(const std::string&)>;
  // Applied to every tensor written (a graph replay copies its static
  // buffers out here: the next replay overwrites them); null: kept as is.
  using Keep = std::function<Tensor(Tensor)>;

  explicit PendingStore(Reader stored_read, Keep keep = nullptr)
      : stored_read_(std::move(stored_read)), keep_(std::move(keep)) {}

  std::optional<Tensor> read(const std::string& name) const override;
  // A later write to a name replaces an earlier one.
  void write(const std::string& name, Tensor t) override;
  // The writes, in first-write order; empties the store.
  std::vector<std::pair<std::string, Tensor>> take() { return std::move(writes_); }

 private:
  Reader stored_read_;
  Keep keep_;
  std::vector<std::pair<std::string, Tensor>> writes_;
};

}  // namespace tensord
