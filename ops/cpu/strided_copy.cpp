#include "ops/cpu/strided_copy.h"

#include <algorithm>
#include <cstring>

#include "ops/error.h"
#include "ops/op_registry.h"

namespace tensord {
namespace {

struct Bytes16 {
  uint64_t lo, hi;
};

// Bytes per parallel chunk: below this the pool's overhead dominates.
constexpr int64_t kGrainBytes = 64 * 1024;
// Tile edge (elements) for transposing copies: 32 x 32 tiles of up to 16
// bytes stay within L1.
constexpr int64_t kTile = 32;

// Offset (elements) in the source of the outer multi-index `o` over dims
// [0, n) of `shape` (row-major), skipping dims listed as excluded.
struct OuterIndexer {
  std::vector<int64_t> sizes, src_strides, dst_strides;
  void offsets(int64_t o, int64_t* src_off, int64_t* dst_off) const {
    int64_t s = 0, d = 0;
    for (size_t k = sizes.size(); k-- > 0;) {
      int64_t i = o % sizes[k];
      o /= sizes[k];
      s += i * src_strides[k];
      d += i * dst_strides[k];
    }
    *src_off = s;
    *dst_off = d;
  }
};

template <class E>
void copy_typed(const OpContext& ctx, const E* src, const Shape& shape, const std::vector<int64_t>& strides, E* dst) {
  const size_t r = shape.size();
  const int64_t n = shape_numel(shape);
  if (r == 0) {
    dst[0] = src[0];
    return;
  }
  const std::vector<int64_t> dst_strides = contiguous_strides(shape);
  const int64_t inner = shape[r - 1];
  const int64_t inner_stride = strides[r - 1];

  // A dim other than the last that is contiguous in the source: copying
  // row by row would stride through the source, so copy tiles instead.
  int64_t unit = -1;
  if (inner_stride != 1 && r >= 2) {
    for (size_t d = 0; d + 1 < r; ++d) {
      if (strides[d] == 1) unit = static_cast<int64_t>(d);
    }
  }
  if (unit >= 0 && inner >= 4) {
    const auto p = static_cast<size_t>(unit);
    OuterIndexer outer;
    for (size_t d = 0; d + 1 < r; ++d) {
      if (d == p) continue;
      outer.sizes.push_back(shape[d]);
      outer.src_strides.push_back(strides[d]);
      outer.dst_strides.push_back(dst_strides[d]);
    }
    const int64_t rows = shape[p];
    const int64_t dst_row_stride = dst_strides[p];
    const int64_t row_tiles = (rows + kTile - 1) / kTile;
    const int64_t col_tiles = (inner + kTile - 1) / kTile;
    const int64_t outer_n = n / (rows * inner);
    const int64_t tasks = outer_n * row_tiles;
    const int64_t grain = std::max<int64_t>(1, kGrainBytes / static_cast<int64_t>(sizeof(E) * kTile * inner));
    ctx.parallel_for(tasks, grain, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        int64_t so, dof;
        outer.offsets(t / row_tiles, &so, &dof);
        const int64_t i0 = (t % row_tiles) * kTile;
        const int64_t i1 = std::min(rows, i0 + kTile);
        for (int64_t jt = 0; jt < col_tiles; ++jt) {
          const int64_t j0 = jt * kTile;
          const int64_t j1 = std::min(inner, j0 + kTile);
          for (int64_t i = i0; i < i1; ++i) {
            const E* s = src + so + i;
            E* d = dst + dof + i * dst_row_stride;
            for (int64_t j = j0; j < j1; ++j) d[j] = s[j * inner_stride];
          }
        }
      }
    });
    return;
  }

  // Row by row: rows are the multi-indices over all dims but the last.
  OuterIndexer outer;
  for (size_t d = 0; d + 1 < r; ++d) {
    outer.sizes.push_back(shape[d]);
    outer.src_strides.push_back(strides[d]);
    outer.dst_strides.push_back(dst_strides[d]);
  }
  const int64_t rows = n / inner;
  const int64_t grain = std::max<int64_t>(1, kGrainBytes / static_cast<int64_t>(sizeof(E) * inner));
  ctx.parallel_for(rows, grain, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      int64_t so, dof;
      outer.offsets(row, &so, &dof);
      const E* s = src + so;
      E* d = dst + dof;
      if (inner_stride == 1) {
        std::memcpy(d, s, static_cast<size_t>(inner) * sizeof(E));
      } else {
        for (int64_t j = 0; j < inner; ++j) d[j] = s[j * inner_stride];
      }
    }
  });
}

}  // namespace

void strided_copy(const OpContext& ctx, const void* src, size_t elem_size, const Shape& shape,
                  const std::vector<int64_t>& strides, void* dst) {
  TENSORD_ASSERT(shape.size() == strides.size());
  if (shape_numel(shape) == 0) return;
  // Drop size-1 dims and merge dims that are contiguous with each other in
  // the source: fewer, longer loops.
  Shape sh;
  std::vector<int64_t> st;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    TENSORD_ASSERT(strides[d] >= 0);
    if (!sh.empty() && st.back() == strides[d] * shape[d]) {
      sh.back() *= shape[d];
      st.back() = strides[d];
    } else {
      sh.push_back(shape[d]);
      st.push_back(strides[d]);
    }
  }
  // A long contiguous run is split so the copy still runs in parallel.
  if (sh.size() == 1 && st[0] == 1) {
    const int64_t per_row = std::max<int64_t>(1, kGrainBytes / static_cast<int64_t>(elem_size));
    if (sh[0] > per_row) {
      const int64_t rows = (sh[0] + per_row - 1) / per_row;
      const int64_t total = sh[0];
      ctx.parallel_for(rows, 1, [&](int64_t begin, int64_t end) {
        const int64_t e0 = begin * per_row;
        const int64_t e1 = std::min(total, end * per_row);
        std::memcpy(static_cast<char*>(dst) + e0 * static_cast<int64_t>(elem_size),
                    static_cast<const char*>(src) + e0 * static_cast<int64_t>(elem_size),
                    static_cast<size_t>(e1 - e0) * elem_size);
      });
      return;
    }
  }
  switch (elem_size) {
    case 1:
      return copy_typed(ctx, static_cast<const uint8_t*>(src), sh, st, static_cast<uint8_t*>(dst));
    case 2:
      return copy_typed(ctx, static_cast<const uint16_t*>(src), sh, st, static_cast<uint16_t*>(dst));
    case 4:
      return copy_typed(ctx, static_cast<const uint32_t*>(src), sh, st, static_cast<uint32_t*>(dst));
    case 8:
      return copy_typed(ctx, static_cast<const uint64_t*>(src), sh, st, static_cast<uint64_t*>(dst));
    case 16:
      return copy_typed(ctx, static_cast<const Bytes16*>(src), sh, st, static_cast<Bytes16*>(dst));
    default:
      TENSORD_ASSERT(false && "strided_copy: unsupported element size");
  }
}

}  // namespace tensord
