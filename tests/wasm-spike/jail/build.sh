#!/bin/sh
# Builds wasm-jail next to this script (Debian: libseccomp-dev).
set -eu
cd "$(dirname "$0")"
gcc -O2 -Wall -Wextra -o wasm-jail wasm-jail.c -lseccomp
