// A RapidJSON Document for one request body, its values taken first from a
// buffer inside it: a small body's whole tree fits there, a larger one goes
// on in pool chunks as any Document does. RapidJSON's own Document takes a
// 64 KiB chunk from malloc for every parse, and glibc's free of it then
// consolidates its fastbins: a few thousand instructions of a tiny request.
// On the stack of the function that parses and converts the body; it is
// neither copied nor moved (the Document points at its pool).
#pragma once

#include <cstddef>

#include <rapidjson/document.h>

namespace tensord {

class BodyDocument {
 public:
  static constexpr size_t kInlineBytes = 4096;

  BodyDocument() : pool_(buf_, sizeof buf_), doc_(&pool_) {}
  BodyDocument(const BodyDocument&) = delete;
  BodyDocument& operator=(const BodyDocument&) = delete;
  ~BodyDocument() = default;

  rapidjson::Document& doc() { return doc_; }

 private:
  alignas(16) char buf_[kInlineBytes];
  rapidjson::MemoryPoolAllocator<> pool_;
  rapidjson::Document doc_;
};

}  // namespace tensord
