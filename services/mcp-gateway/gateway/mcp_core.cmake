add_library(mcp_core STATIC
  ${CMAKE_CURRENT_LIST_DIR}/mcp_server.cc
  ${CMAKE_CURRENT_LIST_DIR}/stdio_server.cc
  ${CMAKE_CURRENT_LIST_DIR}/http_server.cc
  ${CMAKE_CURRENT_LIST_DIR}/http_connection.cc
  ${CMAKE_CURRENT_LIST_DIR}/http_stream.cc
  ${CMAKE_CURRENT_LIST_DIR}/http_checks.cc
  ${CMAKE_CURRENT_LIST_DIR}/http_token.cc)
target_include_directories(mcp_core PUBLIC ${CMAKE_CURRENT_LIST_DIR}/..)
target_link_libraries(mcp_core
  PUBLIC codemode_base nlohmann_json::nlohmann_json absl::status absl::statusor absl::time absl::strings
  PRIVATE spdlog::spdlog Boost::headers Threads::Threads)
