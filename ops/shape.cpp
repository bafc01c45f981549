#include "ops/shape.h"

#include "ops/error.h"

namespace tensord {

int64_t shape_numel(const Shape& s) {
  if (s.size() > kMaxRank) {
    throw Error(ErrorCode::kInvalidArgument,
                "shape has rank " + std::to_string(s.size()) + ", at most 16 is supported");
  }
  int64_t n = 1;
  for (int64_t d : s) {
    if (d < 0) throw Error(ErrorCode::kInvalidArgument, "negative dimension in shape " + shape_str(s));
    if (d != 0 && n > kMaxNumel / d) {
      throw Error(ErrorCode::kInvalidArgument, "shape " + shape_str(s) + " has too many elements");
    }
    n *= d;
  }
  if (n > kMaxNumel) throw Error(ErrorCode::kInvalidArgument, "shape " + shape_str(s) + " has too many elements");
  return n;
}

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(s[i]);
  }
  return out + "]";
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1) {
      throw Error(ErrorCode::kShapeMismatch,
                  std::string(op) + ": shapes " + shape_str(a) + " and " + shape_str(b) + " are not broadcastable");
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

int64_t wrap_dim(int64_t dim, int64_t rank, const char* op) {
  int64_t r = rank == 0 ? 1 : rank;  // PyTorch lets dim 0/-1 address a scalar
  if (dim < -r || dim >= r) {
    throw Error(ErrorCode::kInvalidArgument,
                std::string(op) + ": dim " + std::to_string(dim) + " out of range for rank " + std::to_string(rank));
  }
  return dim < 0 ? dim + r : dim;
}

std::vector<int64_t> contiguous_strides(const Shape& s) {
  std::vector<int64_t> st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= s[i];
  }
  return st;
}

}  // namespace tensord
