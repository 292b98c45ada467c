// Python that prints how many egress relay processes the runner running it has (its
// children running sandbox_runner.egress_relay's serve): 0 while the proxy holds the runner's
// listener itself, 1 while the runner relays (docs/egress.md, "The relay inside, and which
// side dials").
#pragma once

inline constexpr char kCountRelaysCode[] =
    "import os\n"
    "n = 0\n"
    "for p in os.listdir('/proc'):\n"
    "    try:\n"
    "        ppid = open(f'/proc/{p}/stat').read().rsplit(')', 1)[1].split()[1]\n"
    "        cmd = open(f'/proc/{p}/cmdline', 'rb').read()\n"
    "    except (OSError, IndexError):\n"
    "        continue\n"
    "    n += ppid == str(os.getpid()) and b'sandbox_runner.egress_relay import serve' in cmd\n"
    "print(n)\n";
