// The --config file (API.md section 9) as JSON -> ServerConfig.
#pragma once

#include <string>
#include <string_view>

#include "scheduler/config.h"

namespace tensord {

// Parses and validates; throws Error(kBadRequest, "config: ...") naming the
// first problem (unknown keys included: a typo must not be ignored).
ServerConfig config_from_json(std::string_view text);
// Reads the file first; an unreadable file is an error too.
ServerConfig load_config_file(const std::string& path);

}  // namespace tensord
