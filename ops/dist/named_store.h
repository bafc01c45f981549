// NamedStore: a rendezvous store (ops/dist/store.h) that names itself in
// its failures. A store that fails (Redis gone, its connection closed, a
// directory unwritable) throws Error(kUnavailable) "rendezvous store
// <name>: <what failed>": a lost store is the deployment's state, not a
// bug of ours (503, with Retry-After, not 500), and the store library's
// source paths stay out of answers. Timeouts stay Gloo's IoException,
// which the group's join reads as ranks that never arrived.
//
// Thread-safety: as the store it wraps.
#pragma once

#include <gloo/rendezvous/store.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace tensord::dist {

// Throws `e` as NamedStore reports a failure of the store called `name`
// (a tensord::Error as it is).
[[noreturn]] void throw_store_failure(const std::string& name, const std::exception& e);

class NamedStore final : public gloo::rendezvous::Store {
 public:
  // name: how answers name the store ("redis://host:port", "file:///dir").
  NamedStore(std::shared_ptr<gloo::rendezvous::Store> inner, std::string name);

  const std::string& name() const { return name_; }
  gloo::rendezvous::Store& inner() { return *inner_; }

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;

  // The failure of an operation on the store, as NamedStore reports it.
  [[noreturn]] void fail(const std::exception& e) const { throw_store_failure(name_, e); }

 private:
  std::shared_ptr<gloo::rendezvous::Store> inner_;
  std::string name_;
};

}  // namespace tensord::dist
