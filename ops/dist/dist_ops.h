// The dist.* ops (API.md 8), registered by this library (dist_ops.cpp).
#pragma once

#include <string_view>

namespace tensord::dist {

// Whether `op` names a collective ("dist.all_reduce", ...).
bool is_collective_op(std::string_view op);
// Links dist_ops.cpp (and so registers its ops) into a binary that calls it.
void link_dist_ops();

}  // namespace tensord::dist
