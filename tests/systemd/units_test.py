#!/usr/bin/env python3
"""Checks deploy/systemd's user units without a running systemd: their ordering, and that
they name no directory by a specifier whose meaning depends on the systemd version.

`systemd-analyze verify` does not see an ordering cycle through a target: it shows only
when the user manager starts default.target, which then drops a start job to break it (a
unit with both After=default.target and WantedBy=default.target never started at some
logins). This builds the "starts before" graph systemd builds:
  After=X         X before the unit        Before=X        the unit before X
  WantedBy=T / RequiredBy=T, T a target: the unit before T (a target is ordered after
  the units it wants, DefaultDependencies of targets)
and fails on any cycle. It also checks the gateway starts after sandboxd, which it wants.

%S, %C, %L and %E in a user unit are ~/.config on systemd 252 (not ~/.local/state and so
on): the daemons' own defaults (codemode::DefaultStateDir, the XDG base directories) say
where their files go, the same way whatever starts them.

  units_test.py DIR      (DIR: deploy/systemd)
"""
import pathlib
import sys


def read_unit(path):
    """The unit's settings as {key: [values]} (a key may repeat; values split on spaces)."""
    settings = {}
    for raw in path.read_text().replace("\\\n", " ").splitlines():
        line = raw.strip()
        if not line or line[0] in "#;[" or "=" not in line:
            continue
        key, value = line.split("=", 1)
        settings.setdefault(key.strip(), []).extend(value.split())
    return settings


def edges_of(name, settings):
    edges = set()
    for other in settings.get("After", []):
        edges.add((other, name))
    for other in settings.get("Before", []):
        edges.add((name, other))
    for key in ("WantedBy", "RequiredBy"):
        for target in settings.get(key, []):
            if target.endswith(".target"):
                edges.add((name, target))
    return edges


def find_cycle(edges):
    """A list of nodes forming a cycle in the "before" graph, or None."""
    graph = {}
    for a, b in edges:
        graph.setdefault(a, []).append(b)
    state = {}

    def visit(node, path):
        state[node] = "open"
        path.append(node)
        for nxt in graph.get(node, []):
            if state.get(nxt) == "open":
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt, path)
                if found:
                    return found
        path.pop()
        state[node] = "done"
        return None

    for node in list(graph):
        if node not in state:
            found = visit(node, [])
            if found:
                return found
    return None


def main():
    directory = pathlib.Path(sys.argv[1])
    units = {p.name: read_unit(p) for p in sorted(directory.glob("*.service"))}
    failures = []
    for expected in ("sandboxd.service", "mcp-gateway.service"):
        if expected not in units:
            failures.append(f"{expected} is missing from {directory}")
    edges = set()
    for name, settings in units.items():
        edges |= edges_of(name, settings)
    cycle = find_cycle(edges)
    if cycle:
        failures.append("ordering cycle: " + " before ".join(cycle))
    gateway = units.get("mcp-gateway.service", {})
    if ("sandboxd.service", "mcp-gateway.service") not in edges:
        failures.append("mcp-gateway.service is not ordered after sandboxd.service")
    if "sandboxd.service" not in gateway.get("Wants", []) + gateway.get("Requires", []):
        failures.append("mcp-gateway.service does not want sandboxd.service")
    for name, settings in units.items():
        for key, values in settings.items():
            for spec in ("%S", "%C", "%L", "%E"):
                if any(spec in value for value in values):
                    failures.append(f"{name} {key}= uses {spec} (~/.config on systemd 252)")
        if "default.target" not in settings.get("WantedBy", []):
            failures.append(f"{name} is not started with default.target (WantedBy=)")
    for failure in failures:
        print("FAIL:", failure)
    if failures:
        return 1
    print(f"{len(units)} units, {len(edges)} ordering edges, no cycle")
    return 0


if __name__ == "__main__":
    sys.exit(main())
