"""The runner's entry point: `python3 -m sandbox_runner --socket PATH` from the source
tree, and the zipapp's own __main__.py (build_pyz.py copies this file to the root of
sandbox_runner.pyz), so `python3 -I -u sandbox_runner.pyz --socket PATH` runs it too.
The imports are absolute because the zipapp runs this file as a top-level script."""

# datetime before everything else: its import builds the pure-Python datetime classes and
# drops them for _datetime's, and what they held is then reused by the imports below
# instead of staying a hole in an idle session's heap (0.1 MiB).
import datetime  # noqa: F401, I001

# Then asyncio without ssl until TLS is used (ssl_on_demand.py).
from sandbox_runner.ssl_on_demand import import_asyncio  # noqa: E402

import_asyncio()

from sandbox_runner.runner import main  # noqa: E402

if __name__ == "__main__":
    main()
