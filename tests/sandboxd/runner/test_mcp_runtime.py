"""The `mcp` and `mcp.runtime` modules of sandboxed code (the API of the elusznik
mcp-server-code-execution-mode bridge)."""

import unittest

from harness import CATALOG, CatalogTestCase, text_result


class McpRuntimeTest(CatalogTestCase):
    def test_mcp_runtime_module(self):
        res = self.client.exec(
            "import mcp.runtime\nfrom mcp import runtime\n"
            "{'same': runtime is mcp.runtime,"
            " 'servers': list(runtime.list_servers()),"
            " 'awaited': await runtime.list_servers(),"
            " 'tools': [t['name'] for t in runtime.list_tools('memory')],"
            " 'describe': runtime.describe_server('everything')['py_name'],"
            " 'discovered': list(runtime.discovered_servers()),"
            " 'docs': runtime.query_tool_docs('memory', 'search')['tool'],"
            " 'search': [d['tool'] for d in runtime.search_tool_docs('graph')],"
            " 'call': await runtime.call_tool('memory', 'read_graph', {}),"
            " 'error': runtime.ToolError is ToolError}",
            on_tool_call=lambda frame: {"ok": True, "result": text_result("graph")})
        self.assertOk(res)
        self.assertEqual(res.value, {
            "same": True, "servers": ["everything", "memory"],
            "awaited": ["everything", "memory"], "tools": ["search", "read_graph"],
            "describe": "mcp_everything", "discovered": ["everything", "memory"],
            "docs": "search", "search": ["read_graph", "search"], "call": "graph",
            "error": True})

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
        self.assertEqual(res.error["type"], "ToolError")
        tb = res.error["traceback"]
        self.assertIn('File "<cell-1>", line 2', tb)
        self.assertNotIn("sandbox_runner", tb)
        self.assertEqual(tb.count('File "'), 1, tb)
        self.assertTrue(tb.endswith("\nToolError: memory.read_graph: nope\n"), tb)


if __name__ == "__main__":
    unittest.main()
