"""The grpcurl tour of docs/api.md checked against the protos it calls.

API_DOC (docs/api.md) shows sandboxd's API as grpcurl commands with their output. Each
command here must name a method the protos under PROTO_DIR define (`describe` a service or
message they define), every JSON field it sends must be a field of that method's request
(nested messages included), and every key of the output shown under it a field of what
the method returns, so a renamed rpc or field cannot leave the tour behind. Nothing is
started: the doc and the .proto files are read as text.
"""
import glob
import json
import os
import re
import shlex
import unittest

API_DOC = os.environ["API_DOC"]
PROTO_DIR = os.environ["PROTO_DIR"]

SCALARS = {"string", "bytes", "bool", "int32", "int64", "uint32", "uint64", "sint32", "sint64",
           "fixed32", "fixed64", "sfixed32", "sfixed64", "float", "double"}
FIELD = re.compile(r"^\s*(?:repeated\s+|optional\s+)?(map<\s*\w+\s*,\s*([\w.]+)\s*>|[\w.]+)\s+(\w+)\s*=\s*\d+")
RPC = re.compile(r"^\s*rpc\s+(\w+)\s*\(\s*(?:stream\s+)?([\w.]+)\s*\)\s*returns\s*\(\s*(?:stream\s+)?([\w.]+)\s*\)")


def load_protos():
    """(messages {full name: {field: type or None}}, enums {full name}, methods
    {"pkg.Service/Method": (request, response)}, services {full name})."""
    messages, enums, methods, services = {}, set(), {}, set()
    for path in glob.glob(os.path.join(PROTO_DIR, "**", "*.proto"), recursive=True):
        with open(path, encoding="utf-8") as f:
            text = re.sub(r"//[^\n]*", "", f.read())
        package = re.search(r"^package\s+([\w.]+)\s*;", text, re.M).group(1)
        stack = []  # (kind, full name) of the open blocks
        for line in text.splitlines():
            opened = re.match(r"^\s*(message|enum|service|oneof)\s+(\w+)\s*\{", line)
            rpc = RPC.match(line)
            if rpc and stack and stack[-1][0] == "service":
                methods["%s/%s" % (stack[-1][1], rpc.group(1))] = (
                    qualify(rpc.group(2), package), qualify(rpc.group(3), package))
            field = FIELD.match(line)
            owner = [n for k, n in stack if k == "message"]
            if field and not opened and owner and stack[-1][0] in ("message", "oneof"):
                type_ = field.group(2) or field.group(1)
                messages[owner[-1]][field.group(3)] = None if type_ in SCALARS else (type_, package)
            braces = line.count("{")
            if opened:
                kind, name = opened.groups()
                full = (owner[-1] if owner else package) + "." + name
                if kind == "message":
                    messages[full] = {}
                elif kind == "enum":
                    enums.add(full)
                elif kind == "service":
                    services.add(full)
                stack.append((kind, full))
                braces -= 1
            stack += [("other", None)] * braces
            del stack[len(stack) - line.count("}"):]
    for fields in messages.values():  # resolve field types now that every name is known
        for name, ref in fields.items():
            if ref:
                type_, package = ref
                full = qualify(type_, package)
                fields[name] = full if full in messages else None
    return messages, enums, methods, services


def qualify(name, package):
    return name if "." in name else package + "." + name


def unknown_keys(value, message, messages, path=""):
    """Keys of the JSON `value` that are not fields of `message` (recursively)."""
    if isinstance(value, list):
        return [k for item in value for k in unknown_keys(item, message, messages, path)]
    if not isinstance(value, dict) or message is None:
        return []
    fields = messages[message]
    bad = []
    for key, item in value.items():
        if key not in fields:
            bad.append("%s%s (not a field of %s)" % (path, key, message))
        else:
            bad += unknown_keys(item, fields[key], messages, path + key + ".")
    return bad


def output_keys(lines):
    """The field names an output shown as `# {...}` lines names, keys of maps excepted."""
    keys = set()
    for line in lines:
        keys |= {k for k in re.findall(r'"([^"\\]+)":', line) if "/" not in k}
    return keys


def reachable_fields(message, messages):
    seen, todo, names = set(), [message], set()
    while todo:
        m = todo.pop()
        if m in seen or m not in messages:
            continue
        seen.add(m)
        for name, type_ in messages[m].items():
            names.add(name)
            if type_:
                todo.append(type_)
    return names


def tour_commands(text):
    """[(argv, stdin lines, output lines)] of every grpcurl command in the doc's sh blocks."""
    commands = []
    for block in re.findall(r"^```sh\n(.*?)^```", text, re.M | re.S):
        lines = block.splitlines()
        i = 0
        while i < len(lines):
            line = lines[i]
            i += 1
            if not line.startswith("grpcurl "):
                continue
            while line.endswith("\\"):
                line = line[:-1] + " " + lines[i].strip()
                i += 1
            heredoc = re.search(r"<<'?(\w+)'?\s*$", line)
            stdin = []
            if heredoc:
                line = line[:heredoc.start()]
                while lines[i] != heredoc.group(1):
                    stdin.append(lines[i])
                    i += 1
                i += 1
            output = []
            while i < len(lines) and lines[i].startswith("#"):
                output.append(lines[i])
                i += 1
            commands.append((shlex.split(line), stdin, output))
    return commands


class ApiDocTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with open(API_DOC, encoding="utf-8") as f:
            cls.commands = tour_commands(f.read())
        cls.messages, cls.enums, cls.methods, cls.services = load_protos()

    def test_the_protos_are_read(self):
        self.assertIn("sandbox.v1.SandboxService/Execute", self.methods)
        self.assertEqual(self.methods["grpc.health.v1.Health/Check"],
                         ("grpc.health.v1.HealthCheckRequest", "grpc.health.v1.HealthCheckResponse"))
        self.assertEqual(self.messages["sandbox.v1.ExecuteRequest"]["start"], "sandbox.v1.StartExecution")

    def test_every_grpcurl_command_names_a_method_and_its_fields(self):
        self.assertGreater(len(self.commands), 15)
        problems = []
        for argv, stdin, output in self.commands:
            words = [w for w in argv[1:] if not w.startswith("-")]
            data = argv[argv.index("-d") + 1] if "-d" in argv else None
            target = words[-1]
            if "describe" in words:
                if target not in self.services and target not in self.messages:
                    problems.append("describe %s: no such service or message" % target)
                continue
            if target == "list":
                continue
            if target not in self.methods:
                problems.append("%s: no such method in %s" % (target, PROTO_DIR))
                continue
            request, response = self.methods[target]
            sent = stdin if data == "@" else [data] if data else []
            for message in sent:
                problems += ["%s: %s" % (target, k)
                             for k in unknown_keys(json.loads(message), request, self.messages)]
            shown = output_keys(l for l in output if not l.startswith("# ERROR"))
            problems += ["%s output: %s is not a field of %s or below" % (target, k, response)
                         for k in sorted(shown - reachable_fields(response, self.messages))]
        self.assertEqual(problems, [], "docs/api.md's grpcurl commands that the protos disagree with")


if __name__ == "__main__":
    unittest.main()
