"""The catalog as user code sees it: proxy signatures and docs, server objects, the `tools`
mapping, the discovery helpers, and set_catalog replacing servers."""

import unittest

from harness import CATALOG, CatalogTestCase, RunnerTestCase, text_result


class CatalogTest(CatalogTestCase):
    def test_signatures_and_docs(self):
        res = self.client.exec(
            "import inspect\n"
            "[str(inspect.signature(mcp_everything.echo)),"
            " str(inspect.signature(mcp_everything.search)),"
            " str(inspect.signature(mcp_memory.read_graph)),"
            " mcp_everything.echo.__name__, mcp_everything.echo.__qualname__,"
            " inspect.iscoroutinefunction(mcp_everything.get_image)]")
        self.assertOk(res)
        self.assertEqual(res.value, [
            "(message: str)",
            "(query: str, limit: int = 10, tags: list | None = None, max_depth: int = None)",
            "()", "echo", "mcp_everything.echo", True])
        res = self.client.exec("mcp_everything.search.__doc__")
        doc = res.value
        self.assertIn("Search documents by query", doc)
        self.assertIn("query (string, required)", doc)
        self.assertIn("limit (integer, optional, default 10): max results", doc)
        self.assertIn("max_depth (integer, optional, sent as 'max-depth')", doc)
        res = self.client.exec("help(mcp_everything.echo)")
        self.assertOk(res)
        self.assertIn("echo(message: str)", res.stream("stdout"))
        self.assertIn("Echoes back the input", res.stream("stdout"))

    def test_server_objects(self):
        res = self.client.exec("[dir(mcp_everything), repr(mcp_memory), sorted(mcp_servers),"
                               " mcp_servers['memory'] is mcp_memory,"
                               " mcp_everything['get-image'] is mcp_everything.get_image]")
        self.assertOk(res)
        dir_, repr_, servers, same, by_name = res.value
        self.assertEqual(dir_, ["add", "echo", "get_image", "search"])
        self.assertIn("search", repr_)
        self.assertIn("read_graph", repr_)
        self.assertEqual(servers, ["everything", "memory"])
        self.assertTrue(same and by_name)
        res = self.client.exec("mcp_everything.ecko")
        self.assertEqual(res.error["type"], "AttributeError")
        self.assertIn("'echo'", res.error["message"])

    def test_tools_mapping(self):
        res = self.client.exec(
            "[sorted(tools), tools['everything.echo'] is mcp_everything.echo,"
            " tools['echo'] is mcp_everything.echo, 'search' in tools,"
            " tools['memory.search'] is mcp_memory.search,"
            " tools['get-image'] is mcp_everything.get_image]")
        self.assertOk(res)
        keys, *checks = res.value
        self.assertEqual(keys, sorted([
            "everything.echo", "everything.add", "everything.get-image", "everything.search",
            "memory.search", "memory.read_graph", "echo", "add", "get-image", "read_graph"]))
        self.assertEqual(checks, [True, True, False, True, True])
        res = self.client.exec("tools['everything.ecoh']")
        self.assertEqual(res.error["type"], "ToolNotFoundError")
        self.assertIn("everything.echo", res.error["message"])
        res = self.client.exec("try:\n    tools['x']\nexcept KeyError:\n    caught = 1\ncaught")
        self.assertEqual(res.result, "1")

    def test_discover_schema_search(self):
        res = self.client.exec("_discover()")
        self.assertOk(res)
        discovered = res.value
        self.assertEqual(sorted(discovered), ["everything", "memory"])
        echo = next(t for t in discovered["everything"] if t["name"] == "echo")
        self.assertEqual(echo["description"], "Echoes back the input")
        self.assertEqual(echo["call"], "await mcp_everything.echo(message)")

        schema = self.client.exec("_schema('everything.echo')").value
        self.assertEqual(schema["name"], "everything.echo")
        self.assertEqual(schema["input_schema"]["required"], ["message"])
        self.assertIsNone(schema["output_schema"])
        self.assertEqual(self.client.exec("_schema('read_graph')['name']").value,
                         "memory.read_graph")
        res = self.client.exec("_schema('search')")
        self.assertEqual(res.error["type"], "ToolNotFoundError")
        self.assertIn("ambiguous", res.error["message"])

        # "graph" in a tool name weighs more than "graph" and "nodes" in a description.
        hits = self.client.exec("_search('GRAPH nodes')").value
        self.assertEqual([(h["server"], h["tool"], h["score"]) for h in hits],
                         [("memory", "read_graph", 4), ("memory", "search", 2)])
        hits = self.client.exec("_search('search')").value
        self.assertEqual([(h["server"], h["tool"]) for h in hits][:2],
                         [("everything", "search"), ("memory", "search")])
        self.assertTrue(all(set(h) == {"server", "tool", "description", "score"} for h in hits))
        self.assertEqual(len(self.client.exec("_search('search', limit=1)").value), 1)
        self.assertEqual(self.client.exec("_search('zzz')").value, [])

    def test_discovery_helpers_can_be_awaited(self):
        # codemode-lite documents them as coroutines: `tools_list = await _discover()`.
        res = self.client.exec(
            "import copy, pickle\n"
            "plain = [_discover(), _schema('everything.echo'), _search('graph')]\n"
            "awaited = [await _discover(), await _schema('everything.echo'),"
            " await _search('graph'), await _search('')]\n"
            "[a == p for a, p in zip(awaited, plain)] + [type(a).__name__ for a in awaited]"
            " + [type(pickle.loads(pickle.dumps(p))).__name__ for p in plain]"
            " + [type(copy.deepcopy(plain[0])).__name__, json.dumps(plain[2]) == json.dumps(awaited[2])]")
        self.assertOk(res)
        self.assertEqual(res.value, [True, True, True, "dict", "dict", "list", "list",
                                     "dict", "dict", "list", "dict", True])

    def test_set_catalog_replaces_servers(self):
        self.client.exec("keep = 1")
        smaller = {"servers": [CATALOG["servers"][1]]}
        self.client.set_catalog(smaller)
        res = self.client.exec("['mcp_everything' in globals(), sorted(mcp_servers),"
                               " sorted(tools), keep]")
        self.assertOk(res)
        self.assertEqual(res.value, [False, ["memory"], sorted(
            ["memory.search", "memory.read_graph", "search", "read_graph"]), 1])

    def test_real_mcp_names_win_over_python_names(self):
        # As catalog.cc names them: 'a-b' came first, so the tool 'a_b' is a_b_2; the
        # server 'b' is mcp_b, so the server 'mcp_b' is mcp_mcp_b.
        tool = lambda name, py_name: {"name": name, "py_name": py_name,  # noqa: E731
                                      "js_name": py_name, "py_params": {},
                                      "input_schema": {"type": "object"}}
        self.client.set_catalog({"servers": [
            {"name": "h", "py_name": "mcp_h", "tools": [tool("a-b", "a_b"), tool("a_b", "a_b_2")]},
            {"name": "b", "py_name": "mcp_b", "tools": [tool("echo", "echo")]},
            {"name": "mcp_b", "py_name": "mcp_mcp_b", "tools": [tool("echo", "echo")]},
        ]})
        answer = lambda frame: {"ok": True, "result": text_result("1")}  # noqa: E731
        res = self.client.exec(
            "await call_tool('h', 'a_b'); await call_tool('h', 'a-b')\n"
            "await call_tool('h', 'a_b_2'); await call_tool('mcp_b', 'echo')\n"
            "await call_tool('b', 'echo'); await call_tool('mcp_mcp_b', 'echo')\n"
            "await mcp_h['a_b'](); await tools['a_b']()\n"
            "[_schema(n)['name'] for n in ('h.a_b', 'mcp_h.a_b', 'a_b', 'mcp_b.echo', 'b.echo')]",
            on_tool_call=answer)
        self.assertOk(res)
        self.assertEqual([f"{c['server']}/{c['tool']}" for c in res.calls], [
            "h/a_b", "h/a-b", "h/a_b", "mcp_b/echo", "b/echo", "mcp_b/echo", "h/a_b", "h/a_b"])
        self.assertEqual(res.value, ["h.a_b", "h.a_b", "h.a_b", "mcp_b.echo", "b.echo"])

    def test_parameter_names_are_the_ones_the_catalog_gives(self):
        # Names no rule of the runner would give ('max-depth' would be max_depth, 'from'
        # from_, the ** parameter kwargs): the runner reads them and computes none.
        self.client.set_catalog({"servers": [{"name": "s", "py_name": "mcp_s", "tools": [
            _tool({"max-depth": "depth_limit", "from": "origin", "a b": None}, "rest",
                  {"type": "object", "required": ["max-depth"],
                   "properties": {"max-depth": {"type": "integer"}, "from": {}, "a b": {}}})]}]})
        res = self.client.exec(
            "import inspect\n"
            "[str(inspect.signature(mcp_s.t)), await mcp_s.t(depth_limit=3, origin='x', **{'a b': 1})]",
            on_tool_call=lambda frame: {"ok": True, "result": text_result("1")})
        self.assertOk(res)
        self.assertEqual(res.value, ["(depth_limit: int, origin=None, **rest)", 1])
        self.assertEqual(res.calls[0]["arguments"], {"max-depth": 3, "from": "x", "a b": 1})

    def test_malformed_parameter_names_close_the_connection(self):
        good = {"a": "a", "a b": None}
        bad = [
            (None, "kwargs"),                            # no py_params
            ([["a", "a"]], "kwargs"),                    # not an object
            ({"a": "a"}, "kwargs"),                      # a parameter left out
            ({**good, "c": "c"}, "kwargs"),              # one the schema does not have
            ({"a": "class", "a b": None}, "kwargs"),     # a keyword
            ({"a": "x-y", "a b": None}, "kwargs"),       # not an identifier
            ({"a": "\uff46", "a b": None}, "kwargs"),    # read as `f` in source (NFKC)
            ({"a": 5, "a b": None}, "kwargs"),           # not a string
            ({"a": "a", "a b": "a"}, None),              # a name given twice
            (good, None),                                # no ** parameter for 'a b'
            (good, "a"),                                 # a ** name that is taken
            (good, "for"),                               # a ** name that is a keyword
            ({"a": "a", "a b": "a_b"}, "kwargs"),        # a ** parameter nothing needs
        ]
        client = self.client
        for py_params, py_kwargs in bad + [(good, "kwargs")]:
            with self.subTest(py_params=py_params, py_kwargs=py_kwargs):
                catalog = {"servers": [{"name": "s", "py_name": "mcp_s", "tools": [
                    _tool(py_params, py_kwargs, {"properties": {"a": {}, "a b": {}}})]}]}
                if py_kwargs == "kwargs" and py_params is good:
                    client.set_catalog(catalog)
                    res = client.exec("import inspect\nstr(inspect.signature(mcp_s.t))")
                    self.assertEqual(res.result, "'(a=None, **kwargs)'")
                    continue
                client.send({"type": "set_catalog", "id": 7, "catalog": catalog})
                self.assertTrue(client.at_eof(timeout=5))
                client = self.connect()
                client.expect("ready")


class ServerObjectNamesTest(RunnerTestCase):
    """sandboxd never names a tool after an attribute of the server object itself
    (codemode::PythonToolName); a catalog that does is refused, never half installed."""

    def test_a_tool_named_like_the_server_objects_own_attributes_is_refused(self):
        client = self.client
        for py_name in ("__class__", "__dict__", "__doc__", "__weakref__", "_MCPServer__spec",
                        "_MCPServer__proxies"):
            with self.subTest(py_name=py_name):
                tool = {**_tool({}, None, {"properties": {}}), "py_name": py_name}
                client.send({"type": "set_catalog", "id": 7, "catalog": {"servers": [
                    {"name": "s", "py_name": "mcp_s", "tools": [tool]}]}})
                self.assertTrue(client.at_eof(timeout=5))
                client = self.connect()
                client.expect("ready")

    def test_the_names_sandboxd_gives_them_install_and_call_the_tool(self):
        tools = [{**_tool({}, None, {"properties": {}}), "name": name, "py_name": py_name,
                  "js_name": py_name}
                 for name, py_name in (("__class__", "__class___"), ("__dict__", "__dict___"),
                                       ("ok", "ok"))]
        self.client.set_catalog({"servers": [{"name": "s", "py_name": "mcp_s", "tools": tools}]})
        res = self.client.exec("[await mcp_s.__class___(), await mcp_s.ok(), type(mcp_s).__name__]",
                               on_tool_call=lambda f: {"ok": True, "result": text_result(f["tool"])})
        self.assertOk(res)
        self.assertEqual(res.value, ["__class__", "ok", "MCPServer"])


def _tool(py_params, py_kwargs, input_schema):
    return {"name": "t", "py_name": "t", "js_name": "t", "input_schema": input_schema,
            "py_params": py_params, "py_kwargs": py_kwargs}


if __name__ == "__main__":
    unittest.main()
