# mcp_core unit tests: McpSession, the stdio transport over pipes, the Streamable HTTP
# transport on a loopback port with httplib::Client.
find_package(PkgConfig REQUIRED)
# The services' PkgConfig::HTTPLIB target is local to that directory: import our own.
pkg_check_modules(MCP_CORE_TEST_HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)

add_executable(mcp_core_unit_tests
  ${CMAKE_CURRENT_LIST_DIR}/mcp_session_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/stdio_server_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/http_checks_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/http_server_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/http_front_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/http_stream_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/http_token_test.cc)
target_include_directories(mcp_core_unit_tests PRIVATE ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(mcp_core_unit_tests PRIVATE
  mcp_core PkgConfig::MCP_CORE_TEST_HTTPLIB GTest::gmock Threads::Threads absl::strings)
add_gtest_suite(mcp_core_unit_tests unit)
