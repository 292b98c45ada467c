#include "flag_groups.h"

// Every flag of mcp-gateway (main.cc, *_flags.cc, and --log_level of base/daemon.cc) in the
// group an operator looks for it in. A flag in no group is a bug that --help reports on
// stderr (tests/cli fails on it); docs/operating.md's flag table lists them all too.
codemode::ProgramHelp GatewayHelp() {
  return {
      "mcp-gateway",
      "mcp-gateway: MCP tools run_python and run_javascript, whose code calls your MCP "
      "servers' tools.",
      {
          {"Listening and auth",
           {"transport", "listen", "path", "token", "token_file", "no_auth", "allowed_origins",
            "allowed_hosts"}},
          {"Sessions and limits",
           {"session_idle_ttl", "max_mcp_sessions", "max_mcp_sessions_per_credential",
            "max_http_connections", "max_unauthenticated_connections",
            "max_http_connections_per_credential", "max_body_bytes", "max_header_bytes",
            "max_headers", "http_header_timeout", "http_idle_timeout", "resume_grace",
            "max_replay_bytes", "max_replay_bytes_per_session",
            "max_resumable_streams_per_session", "max_request_bytes_in_flight",
            "max_request_bytes_in_flight_per_credential", "max_message_json_values",
            "max_calls_in_flight", "max_calls_in_flight_per_credential",
            "max_call_bytes_in_flight", "max_call_bytes_in_flight_per_credential",
            "max_resource_reads_in_flight", "max_resource_reads_in_flight_per_credential",
            "resource_read_wait", "parked_call_threads",
            "max_pending_write_bytes", "max_pending_write_bytes_per_credential",
            "max_write_overdraft_bytes", "max_write_overdraft_bytes_per_credential",
            "max_buffered_bytes", "max_buffered_bytes_per_credential"}},
          {"Runs and sandboxes",
           {"sandboxd", "isolation", "image", "tools", "default_timeout_seconds",
            "max_timeout_seconds", "max_code_bytes", "spill_stdout_bytes", "max_resource_bytes",
            "max_sandboxes_per_credential", "sandbox_egress", "credential_settings",
            "max_out_path_bytes", "max_out_bytes",
            "resources_page_size", "resources_poll_interval", "resources_look_timeout",
            "resources_list_timeout", "resources_read_timeout",
            "handle_key_file", "handle_ttl", "sandbox_cancel_grace", "max_tool_calls_per_run",
            "max_tool_calls_in_flight", "max_tool_calls_in_flight_per_credential",
            "max_tool_calls_in_flight_total", "max_tool_call_bytes", "max_tool_result_bytes",
            "max_tool_call_bytes_in_flight", "max_tool_call_bytes_in_flight_per_credential",
            "max_tool_call_bytes_in_flight_total"}},
          {"Upstreams",
           {"config", "config_dir", "call_timeout", "startup_wait", "upstream_discover_timeout",
            "upstream_stream_retry_min", "upstream_stream_retry_max", "min_tools_refresh_interval",
            "upstream_notification_rate", "upstream_log_rate", "max_catalog_bytes_per_upstream",
            "max_upstream_message_bytes", "max_upstream_bytes_in_flight",
            "max_upstream_bytes_in_flight_per_credential", "upstream_message_idle_timeout",
            "upstream_write_timeout"}},
          {"Approvals",
           {"approval_default", "approval_timeout", "approval_gather",
            "max_kept_result_bytes_per_credential"}},
          {"Observability",
           {"log_level", "metrics_listen", "metrics_max_tool_labels", "audit_log",
            "audit_max_bytes", "audit_keep", "audit_drain_timeout", "audit_arguments", "stage_times"}},
          {"TLS and several machines",
           {"sandboxd_token_file", "sandboxd_tls_ca_file", "sandboxd_tls_cert_file",
            "sandboxd_tls_key_file", "sandboxd_tls_server_name", "sandboxd_resolve_interval"}},
      }};
}
