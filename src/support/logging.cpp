#include "support/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace etc {

void init_logging(LogLevel level) {
  auto logger = spdlog::stderr_color_mt("etc");
  logger->set_pattern("etc: %l: %v");
  switch (level) {
    case LogLevel::kQuiet:
      logger->set_level(spdlog::level::err);
      break;
    case LogLevel::kWarn:
      logger->set_level(spdlog::level::warn);
      break;
    case LogLevel::kInfo:
      logger->set_level(spdlog::level::info);
      break;
    case LogLevel::kDebug:
      logger->set_level(spdlog::level::debug);
      break;
  }
  spdlog::set_default_logger(std::move(logger));
}

}  // namespace etc
