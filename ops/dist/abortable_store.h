// AbortableStore: a gloo::rendezvous::Store whose waits give up when a
// flag is set, so a rank joining a group (Gloo's connectFullMesh waits in
// the store for every peer's address) stops when the job it joins for has
// failed elsewhere, instead of at the rendezvous timeout. Everything else
// goes to the store it wraps.
#pragma once

#include <gloo/rendezvous/store.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace tensord::dist {

class AbortableStore final : public gloo::rendezvous::Store {
 public:
  // Waits on `inner` in slices of `slice`, checking `abort` between them.
  AbortableStore(std::shared_ptr<gloo::rendezvous::Store> inner, std::shared_ptr<const std::atomic<bool>> abort,
                 std::chrono::milliseconds slice = std::chrono::milliseconds(50));

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  // Throws gloo::IoException at the timeout (as Gloo's stores do) or as
  // soon as `abort` is set.
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;

 private:
  std::shared_ptr<gloo::rendezvous::Store> inner_;
  std::shared_ptr<const std::atomic<bool>> abort_;
  std::chrono::milliseconds slice_;
};

}  // namespace tensord::dist
