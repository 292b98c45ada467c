#!/bin/sh
# usage: kill_recorded_wasm.sh RECORD.json...
# Kills what a wasm-tier session record names (its Node's "pid" and, under bubblewrap, its
# sandbox's "init_pid"), each only while /proc/<pid>/stat's start time is the recorded one:
# pids wrap (pid_max may be 32768) and a record outlives its process, so a bare pid may by
# now name another test's daemon. Used by the test harnesses' clean-up (harness.cc,
# processes.mjs); names that are not files (an unmatched glob) are passed over.
for f in "$@"; do
  [ -f "$f" ] || continue
  for k in '' init_; do
    p=$(grep -o "\"${k}pid\":[0-9]*" "$f" | head -1 | cut -d: -f2)
    t=$(grep -o "\"${k}start_time\":[0-9]*" "$f" | head -1 | cut -d: -f2)
    [ -n "$p" ] && [ "$p" -gt 0 ] && [ -n "$t" ] || continue
    [ "$(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null | cut -d' ' -f20)" = "$t" ] && kill -KILL "$p" 2>/dev/null
  done
done
exit 0
