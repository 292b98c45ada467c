#include "podman_flags.h"

#include <algorithm>
#include <iterator>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "base/log_text.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "base/secret_file.h"
#include "paths.h"
#include "sandboxd/sandbox_factory.h"
#include "sandboxd/seccomp_profile.h"
#include "sandboxd/trusted_files.h"

ABSL_FLAG(std::string, seccomp_base, "/usr/share/containers/seccomp.json",
          "podman's default seccomp profile, from which sandboxd derives the one every "
          "container runs under: the same, with the creation of namespaces (clone/unshare "
          "with namespace flags, clone3, setns) denied, written to <state_dir>/seccomp.json "
          "at start. \"podman\": podman's default unchanged (sandboxed code can then create "
          "user namespaces).");
ABSL_FLAG(std::string, podman, "podman", "podman binary.");
ABSL_FLAG(absl::Duration, podman_timeout, absl::Seconds(60),
          "How long a podman CLI command may run before sandboxd kills it. A removal that "
          "runs out of it is tried again later (after 1 s, doubling to a minute), not at "
          "once with each of its containers on its own.");
ABSL_FLAG(std::vector<std::string>, podman_args, {},
          "Extra global podman flags, comma-separated (for example --root=/x,--runroot=/y): "
          "--root, --runroot, --tmpdir, --storage-driver, --storage-opt (no mount_program), "
          "--cgroup-manager, --events-backend, --log-level.");
ABSL_FLAG(std::string, oci_runtime, "auto",
          "OCI runtime program podman runs containers with: auto (runc on cgroup v1, where "
          "crun fails, else crun when installed, else runc), a name looked up in PATH, or a "
          "path. podman is given the checked path on every call, never a name its "
          "configuration would choose a program for.");
ABSL_FLAG(std::string, runsc, "/usr/bin/runsc", "gVisor's runsc binary (--isolation=gvisor).");
ABSL_FLAG(std::string, gvisor_platform, "ptrace",
          "How gVisor intercepts system calls: ptrace (works everywhere) or kvm (needs "
          "/dev/kvm).");
ABSL_FLAG(bool, podman_api, true,
          "Start container-isolation sandboxes through podman's REST service, which sandboxd "
          "runs (`podman system service`, its socket in <state_dir>/podman-api, a directory "
          "only sandboxd's user may enter) and restarts when it ends: about 40 ms less per "
          "start than a `podman run` process. Where the service is not up, and for gVisor "
          "and rlimit-limited containers, the podman CLI starts them. false: the CLI "
          "always.");

namespace {

// --podman_args: only podman's flags for where its store lives and how it logs and
// accounts. Others name programs podman runs as its user for every container (--runtime,
// --conmon, --hooks-dir, --network-cmd-path, a storage mount_program) or another podman to
// talk to (--url, --connection): nothing here would check them.
absl::Status CheckPodmanArgs(const std::vector<std::string>& args) {
  static constexpr absl::string_view kAllowed[] = {"--root", "--runroot", "--tmpdir", "--storage-driver",
                                                   "--storage-opt", "--cgroup-manager", "--events-backend",
                                                   "--log-level"};
  for (size_t i = 0; i < args.size(); ++i) {
    const absl::string_view arg = args[i];
    const absl::string_view name = arg.substr(0, arg.find('='));
    const bool allowed = std::find(std::begin(kAllowed), std::end(kAllowed), name) != std::end(kAllowed);
    // Each takes a value: after '=', or as the next entry.
    const absl::string_view value = name.size() < arg.size() ? arg.substr(name.size() + 1)
                                    : i + 1 < args.size()     ? absl::string_view(args[++i])
                                                              : absl::string_view();
    // containers/storage reads option names in any case ("overlay.Mount_Program").
    if (!allowed || absl::StrContains(absl::AsciiStrToLower(value), "mount_program")) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--podman_args may not hold ", codemode::LogText(allowed ? arg : name),
          ": it may hold only --root, --runroot, --tmpdir, --storage-driver, --storage-opt "
          "(no mount_program), --cgroup-manager, --events-backend and --log-level (use --oci_runtime for "
          "the OCI runtime; podman's other programs come from its own configuration)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<sandboxd::PodmanOptions> PodmanFromFlags(const sandboxd::ManagerOptions& options) {
  sandboxd::PodmanOptions podman;
  podman.image = options.image;
  podman.gvisor = options.isolation.Allows(sandboxd::Isolation::kGvisor);
  // podman runs every container, runsc every gVisor one: each is found once, here, and
  // refused where another user could change it (a later PATH entry never chooses it).
  absl::StatusOr<std::string> program = sandboxd::ResolveOthersCannotChange(absl::GetFlag(FLAGS_podman), "--podman");
  if (!program.ok()) return program.status();
  podman.podman = *program;
  podman.runsc = absl::GetFlag(FLAGS_runsc);
  if (podman.gvisor) {
    program = sandboxd::ResolveOthersCannotChange(podman.runsc, "--runsc");
    if (!program.ok()) return program.status();
    podman.runsc = *program;
  }
  podman.gvisor_platform = absl::GetFlag(FLAGS_gvisor_platform);
  // The OCI runtime too, as a program: podman is given its path, never a name its
  // configuration would map to a program.
  program = sandboxd::ResolveOciRuntime(absl::GetFlag(FLAGS_oci_runtime));
  if (!program.ok()) return program.status();
  podman.oci_runtime = *program;
  podman.global_args = absl::GetFlag(FLAGS_podman_args);
  if (absl::Status s = CheckPodmanArgs(podman.global_args); !s.ok()) return s;
  podman.command_timeout = absl::GetFlag(FLAGS_podman_timeout);
  podman.check_name = absl::StrCat("sbx-", sandboxd::InstanceId(options.state_dir), "-check");
  if (absl::GetFlag(FLAGS_podman_api)) podman.api_socket_dir = options.state_dir + "/podman-api";
  if (absl::GetFlag(FLAGS_seccomp_base) != "podman") {
    podman.seccomp_profile = options.state_dir + "/seccomp.json";
  }
  return podman;
}

absl::StatusOr<std::string> SeccompBaseFromFlags(const sandboxd::PodmanOptions& podman) {
  if (podman.seccomp_profile.empty()) return std::string();
  // Every container runs under what is derived from it.
  return sandboxd::ResolveOthersCannotChange(absl::GetFlag(FLAGS_seccomp_base), "--seccomp_base");
}

absl::Status WriteSeccompProfile(const sandboxd::ManagerOptions& options, const sandboxd::PodmanOptions& podman,
                                 const std::string& base) {
  if (podman.seccomp_profile.empty()) return absl::OkStatus();
  if (absl::Status s = codemode::ClaimPrivateDirectory(options.state_dir, "the state directory", "--state_dir");
      !s.ok()) {
    return s;
  }
  return sandboxd::WriteSeccompProfile(base, podman.seccomp_profile);
}
