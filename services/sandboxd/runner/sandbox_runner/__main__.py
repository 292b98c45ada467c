"""The runner's entry point: `python3 -m sandbox_runner --socket PATH` from the source
tree, and the zipapp's own __main__.py (build_pyz.py copies this file to the root of
sandbox_runner.pyz), so `python3 -I -u sandbox_runner.pyz --socket PATH` runs it too.
The import is absolute because the zipapp runs this file as a top-level script."""

import sys

# asyncio imports ssl (1.5 MiB of every session's memory) for TLS transports that a session
# without network never opens. It is imported here with ssl hidden, so asyncio's own TLS
# says "stdlib ssl module not available"; `import ssl` in user code still loads the module.
sys.modules["ssl"] = None
try:
    import asyncio  # noqa: F401
finally:
    del sys.modules["ssl"]

from sandbox_runner.runner import main  # noqa: E402

if __name__ == "__main__":
    main()
