"""What an idle session costs: the runner imports nothing a session may never use (ssl for
TLS without a network, argparse for three options, difflib for a misspelt name, platform
for a version string), and each is still there the moment code needs it."""

import unittest

from harness import CatalogTestCase

NEVER_AT_IDLE = ("ssl", "argparse", "difflib", "platform")


class IdleFootprintTest(CatalogTestCase):
    def test_an_idle_session_has_not_imported_what_it_may_never_use(self):
        res = self.client.exec(f"import sys\nsorted(m for m in {NEVER_AT_IDLE!r} if m in sys.modules)")
        self.assertOk(res)
        self.assertEqual(res.result, "[]")

    def test_a_misspelt_tool_name_still_gets_suggestions(self):
        res = self.client.exec("await mcp_everything.ech(message='x')")
        self.assertEqual(res.status, "error")
        self.assertIn("did you mean 'echo'", res.error["message"])

    def test_code_that_imports_ssl_gets_the_real_module(self):
        res = self.client.exec("import ssl\nssl.create_default_context().verify_mode == ssl.CERT_REQUIRED")
        self.assertOk(res)
        self.assertEqual(res.result, "True")


if __name__ == "__main__":
    unittest.main()
