"""The `mcp`, `mcp.runtime` and `mcp.servers.<alias>` modules of sandboxed code and the
other names of the sandbox API of mcp-server-code-execution-mode (elusznik), with the
shapes its own code gives (docs/seed-compatibility.md)."""

import unittest

from harness import CATALOG, CatalogTestCase, text_result


class McpRuntimeTest(CatalogTestCase):
    def test_mcp_runtime_module(self):
        res = self.client.exec(
            "import mcp.runtime\nfrom mcp import runtime\n"
            "{'same': runtime is mcp.runtime,"
            " 'servers': runtime.list_servers(),"
            " 'awaited': await runtime.list_servers(),"
            " 'tools': [t['name'] for t in runtime.list_tools('memory')],"
            " 'describe': runtime.describe_server('everything')['alias'],"
            " 'discovered': runtime.discovered_servers(),"
            " 'docs': runtime.query_tool_docs('memory', 'search')['tool'],"
            " 'search': [d['tool'] for d in runtime.search_tool_docs('graph')],"
            " 'call': await runtime.call_tool('memory', 'read_graph', {}),"
            " 'error': issubclass(runtime.MCPError, ToolError)}",
            on_tool_call=lambda frame: {"ok": True, "result": text_result("graph")})
        self.assertOk(res)
        self.assertEqual(res.value, {
            "same": True, "servers": ("everything", "memory"),
            "awaited": ("everything", "memory"), "tools": ["search", "read_graph"],
            "describe": "everything", "discovered": ("everything", "memory"),
            "docs": "search", "search": ["read_graph", "search"], "call": "graph",
            "error": True})

    def test_shapes_are_the_bridges(self):
        # mcp-server-code-execution-mode's own code: list_tools() gives MCP's tools/list
        # entries, the metadata names py_names `alias` (server aliases without mcp_), and
        # the *_sync helpers, list_servers and discovered_servers give tuples.
        res = self.client.exec(
            "from mcp import runtime\n"
            "[await runtime.list_tools('everything'), runtime.describe_server('memory'),"
            " runtime.list_tools_sync('memory')[1], runtime.list_servers_sync(),"
            " await runtime.discovered_servers(detailed=True),"
            " runtime.list_loaded_server_metadata()[1]['alias'],"
            " runtime.query_tool_docs_sync('memory', 'read_graph'),"
            " await runtime.query_tool_docs('memory', tool='read_graph', detail='FULL'),"
            " LOADED_MCP_SERVERS, mcp.runtime is runtime]")
        self.assertOk(res)
        (listed, described, cached, servers, detailed, alias, docs, full, loaded,
         same) = res.value
        self.assertEqual(listed[0], {"name": "echo",
                                     "description": CATALOG["servers"][0]["tools"][0]["description"],
                                     "inputSchema": CATALOG["servers"][0]["tools"][0]["input_schema"]})
        self.assertEqual(listed[1]["outputSchema"], {"type": "object"})
        self.assertEqual(set(listed[1]), {"name", "description", "inputSchema", "outputSchema"})
        self.assertEqual((described["name"], described["alias"], described["cwd"]),
                         ("memory", "memory", None))
        self.assertEqual([t["alias"] for t in described["tools"]], ["search", "read_graph"])
        self.assertEqual((cached["name"], cached["alias"], cached["input_schema"]),
                         ("read_graph", "read_graph", {"type": "object"}))
        self.assertEqual(servers, ("everything", "memory"))
        self.assertEqual(detailed, ({"name": "everything", "description": "Test server"},
                                    {"name": "memory", "description": "Knowledge graph"}))
        self.assertEqual(alias, "memory")
        self.assertEqual(docs, [{"server": "memory", "serverAlias": "memory",
                                 "tool": "read_graph", "toolAlias": "read_graph",
                                 "description": "Read the whole graph"}])
        self.assertEqual(full["inputSchema"], {"type": "object"})
        self.assertEqual(loaded, ("everything", "memory"))
        self.assertTrue(same)

    def test_unknown_names_and_failed_calls_raise_mcp_error(self):
        res = self.client.exec(
            "from mcp import runtime\n"
            "caught = []\n"
            "for call in [lambda: runtime.call_tool('nope', 'x'),\n"
            "             lambda: runtime.call_tool('memory', 'nope'),\n"
            "             lambda: runtime.call_tool('memory', 'read_graph'),\n"
            "             lambda: runtime.list_tools('nope'),\n"
            "             lambda: runtime.describe_server('nope'),\n"
            "             lambda: runtime.query_tool_docs('memory', 'nope'),\n"
            "             lambda: runtime.list_tools_sync()]:\n"
            "    try:\n"
            "        value = call()\n"
            "        if asyncio.iscoroutine(value):\n"
            "            await value\n"
            "    except runtime.MCPError as e:\n"
            "        caught.append((isinstance(e, ToolError), isinstance(e, RuntimeError),"
            " str(e)[:40]))\n"
            "try:\n"
            "    await mcp_memory.read_graph()\n"
            "except RuntimeError as e:\n"
            "    caught.append(type(e).__name__)\n"
            "caught",
            on_tool_call=lambda frame: {"ok": False, "error": "nope"})
        self.assertOk(res)
        caught = res.value
        self.assertEqual(len(caught), 8, caught)
        self.assertTrue(all(c[:2] == (True, True) for c in caught[:7]), caught)
        self.assertIn("unknown MCP server 'nope'", caught[0][2])
        self.assertIn("has no tool 'nope'", caught[1][2])
        self.assertEqual(caught[2][2], "memory.read_graph: nope")
        self.assertEqual(caught[7], "ToolError")

    def test_server_objects_list_their_tools_unless_a_tool_has_that_name(self):
        res = self.client.exec(
            "[await mcp_memory.list_tools(), mcp_memory.list_tools(),"
            " 'list_tools' in dir(mcp_memory)]")
        self.assertOk(res)
        awaited, plain, in_dir = res.value
        self.assertEqual(awaited, plain)
        self.assertEqual([t["name"] for t in plain], ["search", "read_graph"])
        self.assertEqual(set(plain[0]), {"name", "description", "inputSchema"})
        self.assertFalse(in_dir)
        self.client.set_catalog({"servers": [{
            "name": "lister", "py_name": "mcp_lister",
            "tools": [{"name": "list_tools", "py_name": "list_tools", "js_name": "list_tools",
                       "py_params": {}, "input_schema": {"type": "object"}}]}]})
        res = self.client.exec(
            "from mcp import runtime\n"
            "[await mcp_lister.list_tools(), [t['name'] for t in runtime.list_tools('lister')]]",
            on_tool_call=lambda frame: {"ok": True, "result": text_result("from the tool")})
        self.assertOk(res)
        self.assertEqual(res.value, ["from the tool", ["list_tools"]])
        self.assertEqual([(c["server"], c["tool"]) for c in res.calls], [("lister", "list_tools")])

    def test_mcp_servers_modules(self):
        res = self.client.exec(
            "import inspect\n"
            "from mcp.servers.everything import *\n"
            "from mcp.servers.memory import read_graph, search\n"
            "import mcp.servers.everything as ev\n"
            "[await read_graph(), await search(query='q'), await ev.add(1, 2),"
            " inspect.iscoroutinefunction(search), str(inspect.signature(search)),"
            " search.__module__, ev.__all__, [t['alias'] for t in ev.TOOLS],"
            " sorted(ev.TOOL_MAP), ev.TOOL_MAP['get_image']['name'], callable(get_image),"
            " mcp.servers.__all__, mcp.servers.memory.read_graph is read_graph]",
            on_tool_call=lambda frame: {"ok": True, "result": text_result(frame["tool"])})
        self.assertOk(res)
        self.assertEqual(res.value, [
            "read_graph", "search", "add", True, "(query: str)", "mcp.servers.memory",
            ["echo", "add", "get_image", "search"], ["echo", "add", "get_image", "search"],
            ["add", "echo", "get_image", "search"], "get-image", True,
            ["everything", "memory"], True])
        self.assertEqual([c["arguments"] for c in res.calls],
                         [{}, {"query": "q"}, {"a": 1, "b": 2}])
        res = self.client.exec(
            "from mcp.servers.memory import read_graph\nawait read_graph()",
            on_tool_call=lambda frame: {"ok": False, "error": "down"})
        self.assertEqual((res.error["type"], res.error["message"]),
                         ("MCPError", "memory.read_graph: down"))
        # A new catalog replaces the modules.
        self.client.set_catalog({"servers": [CATALOG["servers"][1]]})
        res = self.client.exec("import mcp.servers.everything")
        self.assertEqual(res.error["type"], "ModuleNotFoundError")
        self.assertEqual(self.client.exec("mcp.servers.__all__").value, ["memory"])

    def test_modules_codemode_lite_offers_without_import(self):
        res = self.client.exec(
            "[m.__name__ for m in (json, datetime, re, math, collections, itertools,"
            " functools, asyncio)]")
        self.assertOk(res)
        self.assertEqual(res.value, ["json", "datetime", "re", "math", "collections",
                                     "itertools", "functools", "asyncio"])

    def test_tools_gives_the_discovery_helpers_without_listing_them(self):
        # codemode-lite's `tools` holds them: await tools['_discover']().
        res = self.client.exec(
            "[await tools['_discover']() == _discover(), '_schema' in tools,"
            " tools['_search']('graph')[0]['tool'], any(k.startswith('_') for k in tools)]")
        self.assertOk(res)
        self.assertEqual(res.value, [True, True, "read_graph", False])

    def test_module_shows_only_the_api(self):
        res = self.client.exec(
            "import mcp.runtime as rt\n"
            "[rt.__name__, rt.__all__, [getattr(rt, n).__module__ for n in rt.__all__[:-2]],"
            " sorted(n for n in vars(rt) if not n.startswith('__'))]")
        self.assertOk(res)
        name, all_, modules, contents = res.value
        self.assertEqual(name, "mcp.runtime")
        self.assertEqual(all_[-2:], ["ToolError", "MCPError"])
        self.assertIn("call_tool", all_)
        self.assertEqual(set(modules), {"mcp.runtime"})
        self.assertEqual(contents, sorted(all_))

    def test_functions_taken_before_set_catalog_see_the_new_catalog(self):
        self.assertOk(self.client.exec("from mcp.runtime import list_servers"))
        self.client.set_catalog({"servers": [CATALOG["servers"][1]]})
        self.assertEqual(self.client.exec("list(list_servers())").value, ["memory"])

    def test_failed_call_shows_only_user_frames(self):
        res = self.client.exec(
            "from mcp import runtime\nawait runtime.call_tool('memory', 'read_graph')",
            on_tool_call=lambda frame: {"ok": False, "error": "nope"})
        self.assertEqual(res.error["type"], "MCPError")
        tb = res.error["traceback"]
        self.assertIn('File "<cell-1>", line 2', tb)
        self.assertNotIn("sandbox_runner", tb)
        self.assertEqual(tb.count('File "'), 1, tb)
        self.assertTrue(tb.endswith("\nmcp.runtime.MCPError: memory.read_graph: nope\n"), tb)


if __name__ == "__main__":
    unittest.main()
