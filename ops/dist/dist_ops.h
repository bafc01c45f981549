// The dist.* ops (API.md 8), registered by this library (dist_ops.cpp).
#pragma once

namespace tensord::dist {

// Links dist_ops.cpp (and so registers its ops) into a binary that calls it.
void link_dist_ops();

}  // namespace tensord::dist
