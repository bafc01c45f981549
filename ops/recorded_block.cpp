#include "ops/recorded_block.h"

#include <algorithm>

#include "ops/op_registry.h"

namespace tensord {

void RecordedBlock::run(const OpContext& ctx) const {
  const void* st = has_state ? state : nullptr;
  const void* src[kMaxInputs] = {};
  for (int k = 0; k < n_inputs; ++k) src[k] = (inline_mask >> k) & 1 ? inline_in[k] : in[k];
  // Elements [begin, end) row by row, as the elementwise engine walks them.
  auto chunk = [this, st, &src](int64_t begin, int64_t end) {
    const void* ptr[kMaxInputs] = {};
    for (int64_t pos = begin; pos < end;) {
      const int64_t r = pos / row_len, c = pos % row_len;
      const int64_t len = std::min(row_len - c, end - pos);
      for (int k = 0; k < n_inputs; ++k) {
        const int64_t off = r * row_stride[k] + c * stride[k];
        ptr[k] = static_cast<const char*>(src[k]) + static_cast<size_t>(off) * in_elem[k];
      }
      fn(st, static_cast<char*>(out) + static_cast<size_t>(pos) * out_elem, ptr, stride, len);
      pos += len;
    }
  };
  if (n <= grain || !ctx.pool) {
    chunk(0, n);
  } else {
    ctx.parallel_for(n, grain, chunk);
  }
}

}  // namespace tensord
