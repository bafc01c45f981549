// The engine tests' server config: the default one (workqueue limit 2) with
// its single tenant named "t".
#pragma once

#include "scheduler/config.h"

namespace tensord::testing_util {

inline ServerConfig one_tenant_config() {
  ServerConfig c = default_config(2);
  c.tenants[0].name = "t";
  return c;
}

}  // namespace tensord::testing_util
