// Static buffers for a captured graph: values whose lifetimes do not
// overlap share a buffer (the memory plan made concrete), so a graph holds
// about its peak live bytes, not the sum of every intermediate.
#pragma once

#include <cstddef>
#include <vector>

namespace tensord {

// A value that needs a buffer: written by instruction `def`, read up to
// instruction `last` (inclusive; >= def). Its buffer is neither another
// value's that is live at any instruction in [def, last], nor one of
// another value written by `def` itself.
struct BufferUse {
  int def = 0;
  int last = 0;
  size_t bytes = 0;
};

struct BufferAssignment {
  std::vector<int> buffer_of;  // per use: its buffer index
  std::vector<size_t> sizes;   // per buffer: the largest use it holds
};

// Greedy interval assignment in instruction order: each use takes the
// smallest free buffer that holds it, else the largest free one (grown),
// else a new one. Buffers freed by instruction i are reusable from i + 1.
BufferAssignment assign_buffers(const std::vector<BufferUse>& uses);

}  // namespace tensord
