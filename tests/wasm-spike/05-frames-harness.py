# Experiment 5, the parent (sandboxd's side, in the host's python3): hands the child an
# inherited socket as fd 3 and measures frame round trips.
#   python3 05-frames-harness.py connected|listening -- CHILD COMMAND...
# connected: a socketpair end (the child never makes a socket). listening: a bound unix
# socket the child accepts on; the parent connects, disconnects and connects again, as a
# restarted sandboxd would, and checks that the namespace survived. (fd 3 is made in
# preexec_fn and kept through close_fds by pass_fds=[3].)
import json, os, socket, statistics, struct, subprocess, sys, tempfile, time

def send(sock, frame):
    body = json.dumps(frame).encode()
    sock.sendall(struct.pack(">I", len(body)) + body)

def recv(sock):
    def exact(n):
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                raise EOFError("child closed the socket")
            data += chunk
        return data
    (n,) = struct.unpack(">I", exact(4))
    return json.loads(exact(n))

def rtt(sock, frame, count):
    times = []
    for i in range(count):
        t = time.perf_counter()
        send(sock, dict(frame, id=i))
        reply = recv(sock)
        times.append((time.perf_counter() - t) * 1000)
    return reply, {"p50_ms": round(statistics.median(times), 3),
                   "p99_ms": round(sorted(times)[int(count * 0.99) - 1], 3)}

def tool_calls(sock, code, delay_s):
    """Runs `code`, answering each tool_call after delay_s (concurrently); returns
    (done frame, elapsed ms)."""
    t = time.perf_counter()
    send(sock, {"type": "exec", "id": 1, "code": code})
    due = []
    sock.settimeout(0.001)
    buf = b""
    while True:
        now = time.perf_counter()
        for when, call_id, args in [d for d in due if d[0] <= now]:
            send(sock, {"type": "tool_result", "call_id": call_id, "ok": True, "result": args})
            due.remove((when, call_id, args))
        try:
            chunk = sock.recv(65536)
            if not chunk:
                raise EOFError("child closed the socket")
            buf += chunk
        except socket.timeout:
            continue
        while len(buf) >= 4 and len(buf) >= 4 + struct.unpack(">I", buf[:4])[0]:
            (n,) = struct.unpack(">I", buf[:4])
            frame, buf = json.loads(buf[4:4 + n]), buf[4 + n:]
            if frame["type"] == "tool_call":
                due.append((time.perf_counter() + delay_s, frame["call_id"], frame["arguments"]))
            elif frame["type"] == "done":
                sock.settimeout(None)
                return frame, round((time.perf_counter() - t) * 1000, 1)

def session(sock, out, tag):
    out[tag + "_ready"] = recv(sock)
    _, out[tag + "_ping"] = rtt(sock, {"type": "ping"}, 500)
    reply, out[tag + "_exec_x_eq_1"] = rtt(sock, {"type": "exec", "code": "x = 1"}, 200)
    send(sock, {"type": "exec", "id": 0, "code": "y = globals().get('y', 0) + 1; y"})
    out[tag + "_y"] = recv(sock)["result"]
    send(sock, {"type": "probe", "id": 0})
    out[tag + "_new_socket"] = recv(sock)["result"]
    if tag == "first":
        done, elapsed = tool_calls(sock, "[await call_tool('s', 't', {'i': i}) for i in range(200)][-1]", 0)
        out["tool_call_round_trip_ms"] = round(elapsed / 200, 3)
        out["tool_call_last_result"] = done["result"]
        done, elapsed = tool_calls(
            sock, "import asyncio\nlen(await asyncio.gather(*[call_tool('s', 't', {'i': i}) for i in range(50)]))", 0.1)
        out["gather_50_calls_of_100ms"] = {"ms": elapsed, "result": done["result"]}

def main():
    mode = sys.argv[1]
    command = sys.argv[sys.argv.index("--") + 1:]
    out = {"mode": mode}
    if mode == "connected":
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        proc = subprocess.Popen(command, pass_fds=[3],
                                preexec_fn=lambda: os.dup2(child.fileno(), 3))
        child.close()
        session(parent, out, "first")
        parent.close()
    else:
        path = os.path.join(tempfile.mkdtemp(), "runner.sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        listener.listen(1)
        proc = subprocess.Popen(command, pass_fds=[3],
                                preexec_fn=lambda: os.dup2(listener.fileno(), 3))
        listener.close()
        for tag in ("first", "reconnected"):
            for _ in range(200):
                try:
                    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                    sock.connect(path)
                    break
                except OSError:
                    time.sleep(0.05)
            session(sock, out, tag)
            sock.close()
        proc.kill()
    proc.wait(timeout=10)
    print(json.dumps(out))

main()
