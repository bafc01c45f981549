#include "ops/dist/named_store.h"

#include <gloo/common/error.h>

#include <string_view>
#include <utility>

#include "ops/dist/gloo_text.h"
#include "ops/error.h"

namespace tensord::dist {

namespace {

// Gloo's stores report a wait that timed out and a lost connection alike,
// as IoException; only the former says this.
bool is_wait_timeout(const gloo::IoException& e) {
  return std::string_view(e.what()).find("Wait timeout for key") != std::string_view::npos;
}

}  // namespace

NamedStore::NamedStore(std::shared_ptr<gloo::rendezvous::Store> inner, std::string name)
    : inner_(std::move(inner)), name_(std::move(name)) {}

void throw_store_failure(const std::string& name, const std::exception& e) {
  if (const auto* t = dynamic_cast<const Error*>(&e)) throw *t;  // already ours
  throw Error(ErrorCode::kUnavailable, "rendezvous store " + name + ": " + without_source_position(e.what()));
}

void NamedStore::set(const std::string& key, const std::vector<char>& data) {
  try {
    inner_->set(key, data);
  } catch (const std::exception& e) {
    fail(e);
  }
}

std::vector<char> NamedStore::get(const std::string& key) {
  try {
    return inner_->get(key);
  } catch (const gloo::IoException& e) {
    if (is_wait_timeout(e)) throw;
    fail(e);
  } catch (const std::exception& e) {
    fail(e);
  }
}

void NamedStore::wait(const std::vector<std::string>& keys) {
  try {
    inner_->wait(keys);
  } catch (const gloo::IoException& e) {
    if (is_wait_timeout(e)) throw;
    fail(e);
  } catch (const std::exception& e) {
    fail(e);
  }
}

void NamedStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  try {
    inner_->wait(keys, timeout);
  } catch (const gloo::IoException& e) {
    if (is_wait_timeout(e)) throw;
    fail(e);
  } catch (const std::exception& e) {
    fail(e);
  }
}

}  // namespace tensord::dist
