# upstream_unit_tests: gateway_upstream against a fake MCP server (fixtures/fake_mcp_server.py)
# run as a stdio child or on 127.0.0.1 for the HTTP transports. No network beyond loopback.
add_executable(upstream_unit_tests
  ${CMAKE_CURRENT_LIST_DIR}/upstream_config_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/upstream_http_util_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/upstream_jsonrpc_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/upstream_transport_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/upstream_stdio_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/upstream_http_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/upstream_manager_test.cc)
target_include_directories(upstream_unit_tests PRIVATE ${CMAKE_CURRENT_LIST_DIR}/fixtures)
target_compile_definitions(upstream_unit_tests PRIVATE
  FAKE_MCP_SERVER="${CMAKE_CURRENT_LIST_DIR}/fixtures/fake_mcp_server.py")
target_link_libraries(upstream_unit_tests PRIVATE
  gateway_upstream Threads::Threads)
add_gtest_suite(upstream_unit_tests unit TIMEOUT 60)
