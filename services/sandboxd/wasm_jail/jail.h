// The layers of sandboxd-wasm-jail (wasm_jail.c), one file each. A layer that cannot be
// applied ends the process through jail_fail (exit 126, nothing executed).
#pragma once

#include <stddef.h>
#include <stdint.h>

// Writes "wasm-jail: cannot apply <layer>: <reason>" to stderr and exits 126 (jail_fail.c).
void jail_fail(const char* layer, const char* format, ...)
    __attribute__((noreturn, format(printf, 2, 3)));

// Landlock (jail_landlock.c): the ABI of the running kernel, 0 without Landlock.
int jail_landlock_abi(void);
// Restricts this process: read (and execute) beneath `read`, everything beneath `write`,
// no TCP bind or connect (ABI >= 4), signals and abstract unix sockets scoped to the
// domain (ABI >= 6). Returns the ABI used.
int jail_apply_landlock(const char* const* read, int nread, const char* const* write,
                        int nwrite);
// "abi7(fs,tcp,signal,abstract-unix)" (sep ",", space "") or "abi7 (fs, tcp, ...)".
void jail_landlock_describe(int abi, const char* sep, const char* space, char* out, size_t n);
// In a throwaway child: applies an empty ruleset; on failure writes why to `report_fd`
// and exits 1.
void jail_landlock_trial(int report_fd);

// seccomp (jail_seccomp.c): loads the allowlist; `exec_path` is the one pointer execve
// may be called with (the launcher's own execve of PROGRAM); `allow_chmod` 0 refuses
// every mode change (set-user-ID, set-group-ID and sticky bits are refused either way).
void jail_apply_seccomp(const char* exec_path, int allow_chmod);
// "libseccomp 2.5.4, allowlist of N system calls".
void jail_seccomp_describe(char* out, size_t n);
// In a throwaway child: loads the filter; on failure writes why to `report_fd`, exits 1.
void jail_seccomp_trial(int report_fd);

// stderr (jail_stderr.c): forks; returns in the child, whose fd 2 is then a pipe, and never
// in this process, which copies that pipe to its fd 2 within `cap` bytes, waits for the
// child and exits as it did.
void jail_cap_stderr(uint64_t cap);
