// A secret kept in a file only its owner can read: a bearer token, a sealing key. Given
// one, it is read under checks; without one, it is created with a random value at the
// first start, the way Jupyter keeps its token. Nothing here logs a secret.
//
//   absl::StatusOr<std::string> token = LoadOrCreateSecretFile(path, {"token file", "token", "--token_file"});
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace codemode {

// How messages name the file, its secret and the flag that chooses another file.
struct SecretFileKind {
  std::string what = "secret file";
  std::string secret = "secret";
  std::string flag = "--secret_file";
};

// Where `app` keeps its state: $XDG_STATE_HOME/<app> when $XDG_STATE_HOME is an absolute
// path (the XDG base directory specification ignores a relative one), else
// ~/.local/state/<app>. sandboxd and mcp-gateway both default to it, so their state lies
// side by side however they are started (the systemd units name no state directory:
// a user unit's %S is ~/.config on systemd 252).
std::string DefaultStateDir(const std::string& app);
// DefaultStateDir(app)/<name>.
std::string DefaultStateFile(const std::string& app, const std::string& name);

// Reads the secret from `path` (surrounding whitespace stripped; at least 16 characters,
// at most 512 bytes are read), or creates the file (mode 0600) with 32 random bytes in
// hex. Missing directories are created 0700; existing ones keep their mode. Refuses a file
// that is not a regular file owned by us (a symlink included) or that others can read,
// and a directory someone else owns (root aside) or others can write unless it is sticky:
// there another user could swap the file. The file is written under a random name opened
// with O_EXCL|O_NOFOLLOW and linked into place, so nothing planted is ever written to.
absl::StatusOr<std::string> LoadOrCreateSecretFile(const std::string& path,
                                                   const SecretFileKind& kind);

// Reads the whole of `path` (at most `max_bytes`), a secret someone else made (a TLS
// private key): under the checks above, a regular file of ours (not a symlink) that no
// other user may read or write. Nothing is created.
absl::StatusOr<std::string> ReadPrivateFile(const std::string& path, const SecretFileKind& kind,
                                            size_t max_bytes);

// Reads a PEM private key file (ReadPrivateFile's checks), at most 1 MiB; INVALID_ARGUMENT
// naming `flag` when it holds no PEM private key.
absl::StatusOr<std::string> ReadPrivateKeyFile(const std::string& path, const std::string& flag);

// Reads a PEM certificate file, at most 1 MiB: public, but a regular file (a symlink may
// lead to it) that only we or root may write. INVALID_ARGUMENT naming `flag` when it holds
// no certificate or is no regular file, FAILED_PRECONDITION when it cannot be read or
// others could rewrite it.
absl::StatusOr<std::string> ReadCertificateFile(const std::string& path, const std::string& flag);

// A directory only we may enter, for a daemon's state or its socket. The path is walked
// as the kernel resolves it: every directory on the way (symlink targets included) must be
// root's or ours and sticky if others may write it, every symlink root's or ours; missing
// directories are created 0700 inside checked ones; the directory itself must be ours and
// closed to group and others. An existing one is never chmod'ed (a root daemon given
// --socket=/tmp/x.sock would make /tmp 0700). FAILED_PRECONDITION naming
// `what`, `dir`, what is wrong and `flag` otherwise.
// The whole path is checked before anything is made: a refused claim leaves nothing.
absl::Status ClaimPrivateDirectory(const std::string& dir, const std::string& what,
                                   const std::string& flag);
// What ClaimPrivateDirectory would refuse, found without making anything: for a caller
// that claims several (a daemon's state and socket directories) and should make none when
// one is refused. A claim still checks again as it makes.
absl::Status CheckPrivateDirectory(const std::string& dir, const std::string& what, const std::string& flag);

}  // namespace codemode
