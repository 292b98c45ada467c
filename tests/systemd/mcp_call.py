#!/usr/bin/env python3
"""A minimal MCP Streamable HTTP client for tests/systemd/user_service_test.sh, run inside
the test's container (python3 only, no packages).

  mcp_call.py URL TOKEN_FILE STATE_FILE tools
  mcp_call.py URL TOKEN_FILE STATE_FILE call TOOL CODE

The MCP session (its Mcp-Session-Id) is kept in STATE_FILE between invocations, so calls
run in the same sandboxes. Prints the tool names, or the call's text; exits 1 on an error
result.
"""
import json
import pathlib
import sys
import urllib.request

PROTOCOL = "2025-11-25"


def post(url, token, session, message):
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "Authorization": f"Bearer {token}",
        "MCP-Protocol-Version": PROTOCOL,
    }
    if session:
        headers["Mcp-Session-Id"] = session
    request = urllib.request.Request(url, json.dumps(message).encode(), headers, method="POST")
    with urllib.request.urlopen(request, timeout=120) as response:
        body = response.read().decode()
        session = response.headers.get("Mcp-Session-Id") or session
        if response.headers.get("Content-Type", "").startswith("text/event-stream"):
            answers = [json.loads(line[5:]) for line in body.splitlines()
                       if line.startswith("data:") and line[5:].strip()]
            answers = [a for a in answers if a.get("id") == message.get("id")]
            return (answers[-1] if answers else None), session
        return (json.loads(body) if body.strip() else None), session


def main():
    url, token_file, state_file, command = sys.argv[1:5]
    token = pathlib.Path(token_file).read_text().strip()
    state = pathlib.Path(state_file)
    session = state.read_text().strip() if state.exists() else ""
    if not session:
        answer, session = post(url, token, "", {
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": PROTOCOL, "capabilities": {},
                       "clientInfo": {"name": "user_service_test", "version": "1"}}})
        if not answer or "result" not in answer:
            print(f"initialize failed: {answer}")
            return 1
        post(url, token, session, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        state.write_text(session)
    if command == "tools":
        answer, _ = post(url, token, session, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        print(" ".join(tool["name"] for tool in answer["result"]["tools"]))
        return 0
    tool, code = sys.argv[5:7]
    answer, _ = post(url, token, session, {
        "jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": tool, "arguments": {"code": code}}})
    if not answer or "result" not in answer:
        print(f"{tool} failed: {answer}")
        return 1
    result = answer["result"]
    print("\n".join(block.get("text", "") for block in result.get("content", [])))
    return 1 if result.get("isError") else 0


if __name__ == "__main__":
    sys.exit(main())
