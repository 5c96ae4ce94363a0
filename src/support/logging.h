// Logging for etc: spdlog, to stderr, never to stdout (stdout belongs to command output).
#pragma once

#include <spdlog/spdlog.h>

namespace etc {

enum class LogLevel { kQuiet, kWarn, kInfo, kDebug };

// Sets up the process-wide stderr logger. Call once from main().
void init_logging(LogLevel level);

}  // namespace etc
