// jail_fail (jail.h): how every layer of sandboxd-wasm-jail ends the process when it
// cannot be applied.
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "jail.h"

void jail_fail(const char* layer, const char* format, ...) {
  char reason[512];
  va_list args;
  va_start(args, format);
  vsnprintf(reason, sizeof(reason), format, args);
  va_end(args);
  fprintf(stderr, "wasm-jail: cannot apply %s: %s\n", layer, reason);
  exit(126);
}
