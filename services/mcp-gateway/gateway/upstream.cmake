# gateway_upstream: mcpServers config, MCP clients for stdio / Streamable HTTP / legacy SSE
# upstreams, and the UpstreamManager (see upstream.h).
add_library(gateway_upstream STATIC
  ${CMAKE_CURRENT_LIST_DIR}/upstream_config.cc
  ${CMAKE_CURRENT_LIST_DIR}/upstream_process.cc
  ${CMAKE_CURRENT_LIST_DIR}/upstream_jsonrpc.cc
  ${CMAKE_CURRENT_LIST_DIR}/upstream_stdio.cc
  ${CMAKE_CURRENT_LIST_DIR}/upstream_http_util.cc
  ${CMAKE_CURRENT_LIST_DIR}/upstream_http.cc
  ${CMAKE_CURRENT_LIST_DIR}/upstream_client.cc
  ${CMAKE_CURRENT_LIST_DIR}/upstream_manager.cc)
target_include_directories(gateway_upstream PUBLIC ${CMAKE_CURRENT_LIST_DIR}/..)
target_link_libraries(gateway_upstream
  PUBLIC codemode_base nlohmann_json::nlohmann_json absl::status absl::statusor absl::time absl::strings
  PRIVATE spdlog::spdlog PkgConfig::HTTPLIB Threads::Threads)
