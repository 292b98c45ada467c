#include "flag_groups.h"

namespace sandboxd {

// Every flag of sandboxd (main.cc, tcp_flags.cc, and --log_level of base/daemon.cc) in the group an
// operator looks for it in. A flag in no group is a bug that --help reports on stderr
// (tests/cli fails on it); docs/operating.md's "sandboxd flags" table lists them all too.
codemode::ProgramHelp SandboxdHelp() {
  return {
      "sandboxd",
      "sandboxd: Python and JavaScript sessions in hardened Podman containers, over gRPC.",
      {
          {"Listening and auth",
           {"socket", "listen_tcp", "tcp_token_file", "max_rpc_threads", "shutdown_grace"}},
          {"Sessions and limits",
           {"pool_size", "js_pool_size", "pool_max", "js_pool_max", "pool_shrink_after", "max_sessions", "max_sessions_per_owner", "idle_ttl",
            "lost_session_ttl", "max_lost_sessions", "memory_mb", "max_memory_mb", "cpu_millis",
            "max_cpu_millis", "pids", "max_pids", "nofile", "tmp_mb", "workspace_mb",
            "max_disk_mb", "timeout_ms", "max_timeout_ms", "kill_grace", "runner_cpu_millis",
            "runner_cpu_burst", "max_output_bytes",
            "max_display_bytes", "max_code_bytes", "max_file_bytes", "max_queue",
            "max_stream_buffer_bytes"}},
          {"Isolation and images",
           {"state_dir", "image", "images", "start_images_wait", "start_runtime_wait", "runner", "js_runner",
            "isolation", "allowed_isolations", "runsc", "gvisor_platform", "oci_runtime",
            "seccomp_base", "podman", "podman_args", "podman_api", "podman_timeout", "env", "pass_env",
            "wasm_node", "wasm_pyodide", "wasm_python_packages", "wasm_jail", "wasm_bwrap", "wasm_layers", "wasm_dir",
            "wasm_malloc_mmap_threshold",
            "session_uid_range"}},
          {"Egress",
           {"egress_default", "egress_max", "egress_hosts", "egress_max_connections",
            "egress_max_connections_per_owner", "egress_max_bytes_per_session",
            "egress_max_bytes_per_owner", "egress_max_bytes_per_connection",
            "egress_idle_timeout", "egress_max_connection_time"}},
          {"Observability", {"log_level", "metrics_listen", "self_check"}},
          {"TLS and several machines",
           {"tls_cert_file", "tls_key_file", "tls_client_ca_file", "tcp_handshake_timeout",
            "tcp_idle_timeout", "tcp_auth_timeout", "tcp_max_unauthenticated"}},
      }};
}

}  // namespace sandboxd
