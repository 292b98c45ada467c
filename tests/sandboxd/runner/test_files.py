"""The runner's file frames (docs/runner-protocol.md, "Files"): uploads land whole or not at
all (as base64 JSON or binary chunks), downloads return the same bytes, listings; every
path that could lead outside the workspace (absolute, `..`, symlinks planted by user code)
is refused; caps hold; a malformed binary frame closes the connection."""

import base64
import hashlib
import os
import struct
import unittest

from harness import MIB, RunnerTestCase


def b64(data):
    return base64.b64encode(data).decode("ascii")


class FilesTest(RunnerTestCase):
    def upload(self, path, data, chunk=256 * 1024, max_bytes=64 * MIB, upload_id=1):
        self.client.send({"type": "file_upload", "id": upload_id, "path": path,
                          "max_bytes": max_bytes})
        for i in range(0, len(data), chunk) or [0]:
            self.client.send({"type": "file_chunk", "id": upload_id,
                              "data": b64(data[i:i + chunk])})
        self.client.send({"type": "file_commit", "id": upload_id})
        return self.client.recv()

    def send_binary_chunk(self, upload_id, data, client=None):
        """A binary file_chunk frame: the length with its top bit set, the id, the bytes."""
        body = struct.pack(">Q", upload_id) + data
        (client or self.client).sock.sendall(struct.pack(">I", 0x80000000 | len(body)) + body)

    def download(self, path, max_bytes=64 * MIB, download_id=2):
        self.client.send({"type": "file_download", "id": download_id, "path": path,
                          "max_bytes": max_bytes})
        data = b""
        while True:
            frame = self.client.recv()
            if frame["type"] != "file_data":
                return data, frame
            self.assertEqual(frame["id"], download_id)
            data += base64.b64decode(frame["data"])

    def listing(self, path="", max_entries=1000):
        self.client.send({"type": "file_list", "id": 3, "path": path,
                          "max_entries": max_entries})
        return self.client.recv()

    def test_upload_then_code_reads_it_and_download_returns_the_same_bytes(self):
        data = os.urandom(3 * MIB + 17)
        done = self.upload("in/data.bin", data)
        self.assertEqual(done, {"type": "file_written", "id": 1, "size": len(data)})
        res = self.client.exec("import hashlib\n"
                               "hashlib.sha256(open('" + self.workspace +
                               "/in/data.bin', 'rb').read()).hexdigest()")
        self.assertOk(res)
        self.assertEqual(res.result, repr(hashlib.sha256(data).hexdigest()))
        got, end = self.download("in/data.bin")
        self.assertEqual(end["type"], "file_read")
        self.assertEqual(end["size"], len(data))
        self.assertEqual(hashlib.sha256(got).digest(), hashlib.sha256(data).digest())

    def test_empty_file_and_replacing_a_file(self):
        self.assertEqual(self.upload("a.txt", b"")["size"], 0)
        self.assertEqual(self.upload("a.txt", b"new")["size"], 3)
        self.assertEqual(self.download("a.txt")[0], b"new")

    def test_no_half_written_file_under_the_final_name(self):
        self.upload("keep.txt", b"old contents")
        self.client.send({"type": "file_upload", "id": 5, "path": "keep.txt",
                          "max_bytes": 100})
        self.client.send({"type": "file_chunk", "id": 5, "data": b64(b"partial")})
        # The final name still holds the old file while the upload is open...
        self.assertEqual(self.download("keep.txt", download_id=6)[0], b"old contents")
        self.assertNotIn(".upload-", str(self.listing()["entries"]))
        # ... and after an abort, with no temporary file left behind.
        self.client.send({"type": "file_abort", "id": 5})
        self.assertEqual(self.download("keep.txt", download_id=7)[0], b"old contents")
        self.assertEqual(os.listdir(self.workspace), ["keep.txt"])

    def test_over_the_cap_is_refused_and_leaves_nothing(self):
        done = self.upload("big.bin", b"x" * 5000, chunk=1000, max_bytes=4096)
        self.assertEqual(done["type"], "file_error")
        self.assertEqual(done["code"], "resource_exhausted")
        # Its remaining chunks and commit were ignored: the next frame answers a ping.
        self.client.send({"type": "ping", "id": 9})
        self.assertEqual(self.client.expect("pong")["id"], 9)
        self.assertEqual(os.listdir(self.workspace), [])
        with open(os.path.join(self.workspace, "f"), "wb") as f:
            f.write(b"y" * 5000)
        _, end = self.download("f", max_bytes=4096)
        self.assertEqual((end["type"], end["code"]), ("file_error", "resource_exhausted"))

    def test_paths_that_could_leave_the_workspace_are_refused(self):
        outside = os.path.join(self.tmp.name, "outside")
        os.mkdir(outside)
        with open(os.path.join(outside, "secret"), "w") as f:
            f.write("secret")
        os.symlink(outside, os.path.join(self.workspace, "link"))
        os.symlink(os.path.join(outside, "secret"), os.path.join(self.workspace, "s"))
        for path in ["/etc/passwd", "../outside/secret", "a/../../outside/secret",
                     "link/secret", "s", "", "a\0b"]:
            with self.subTest(path=path):
                _, end = self.download(path)
                self.assertEqual((end["type"], end["code"]), ("file_error", "invalid_argument"))
        for i, path in enumerate(["/tmp/x", "../x", "link/planted", "link/new/dir/x"]):
            with self.subTest(upload=path):
                done = self.upload(path, b"planted", upload_id=20 + i)
                self.assertEqual((done["type"], done["code"]), ("file_error", "invalid_argument"))
        self.assertEqual(sorted(os.listdir(outside)), ["secret"])
        listed = self.listing("link")
        self.assertEqual((listed["type"], listed["code"]), ("file_error", "invalid_argument"))

    def test_writing_through_a_symlink_replaces_the_link_not_its_target(self):
        target = os.path.join(self.tmp.name, "target")
        with open(target, "w") as f:
            f.write("host file")
        os.symlink(target, os.path.join(self.workspace, "out.txt"))
        self.assertEqual(self.upload("out.txt", b"mine")["type"], "file_written")
        with open(target) as f:
            self.assertEqual(f.read(), "host file")
        self.assertFalse(os.path.islink(os.path.join(self.workspace, "out.txt")))

    def test_a_symlink_planted_under_the_temporary_name_is_not_followed(self):
        target = os.path.join(self.tmp.name, "target")
        with open(target, "w") as f:
            f.write("host file")
        os.symlink(target, os.path.join(self.workspace, f".upload-{self.proc.pid}-1-x"))
        self.assertEqual(self.upload("x", b"mine")["type"], "file_written")
        with open(target) as f:
            self.assertEqual(f.read(), "host file")
        self.assertEqual(os.listdir(self.workspace), ["x"])

    def test_list_names_type_size_and_mtime_and_hides_uploads_in_progress(self):
        self.upload("out/chart.png", b"\x89PNG....")
        self.upload("out/table.csv", b"a,b\n1,2\n", upload_id=4)
        os.mkdir(os.path.join(self.workspace, "out", "sub"))
        self.client.send({"type": "file_upload", "id": 8, "path": "out/pending",
                          "max_bytes": 10})
        listed = self.listing("out")
        self.assertEqual(listed["type"], "file_list_result")
        self.assertFalse(listed["truncated"])
        entries = {e["path"]: e for e in listed["entries"]}
        self.assertEqual(sorted(entries), ["out/chart.png", "out/sub", "out/table.csv"])
        self.assertEqual((entries["out/table.csv"]["type"], entries["out/table.csv"]["size"]),
                         ("file", 8))
        self.assertEqual(entries["out/sub"]["type"], "directory")
        self.assertGreater(entries["out/chart.png"]["mtime_ms"], 0)
        self.assertTrue(self.listing("out", max_entries=1)["truncated"])
        root = self.listing("")
        self.assertEqual([e["path"] for e in root["entries"]], ["out"])

    def test_missing_and_wrong_kinds(self):
        _, end = self.download("nope.txt")
        self.assertEqual(end["code"], "not_found")
        os.mkdir(os.path.join(self.workspace, "d"))
        _, end = self.download("d")
        self.assertEqual(end["code"], "failed_precondition")
        self.assertEqual(self.upload("d", b"x")["code"], "failed_precondition")
        self.assertEqual(self.listing("nope")["code"], "not_found")

    def test_bad_base64_fails_the_upload_only(self):
        self.client.send({"type": "file_upload", "id": 1, "path": "x", "max_bytes": 100})
        self.client.send({"type": "file_chunk", "id": 1, "data": "not base64!"})
        end = self.client.recv()
        self.assertEqual((end["type"], end["code"]), ("file_error", "invalid_argument"))
        self.assertOk(self.client.exec("1"))

    def test_binary_chunks_upload_the_raw_bytes(self):
        data = os.urandom(2 * MIB + 5)
        self.client.send({"type": "file_upload", "id": 9, "path": "bin/raw.bin",
                          "max_bytes": 64 * MIB})
        for i in range(0, len(data), MIB):
            self.send_binary_chunk(9, data[i:i + MIB])
        self.send_binary_chunk(9, b"")
        self.client.send({"type": "file_commit", "id": 9})
        self.assertEqual(self.client.recv(), {"type": "file_written", "id": 9, "size": len(data)})
        self.assertEqual(self.download("bin/raw.bin")[0], data)
        # The cap counts binary bytes too.
        self.client.send({"type": "file_upload", "id": 10, "path": "small", "max_bytes": 4})
        self.send_binary_chunk(10, b"12345")
        end = self.client.recv()
        self.assertEqual((end["type"], end["code"]), ("file_error", "resource_exhausted"))

    def test_malformed_binary_frames_close_the_connection(self):
        for length in [0x80000000 | 3,                      # shorter than the id
                       0x80000000 | (64 * MIB)]:            # over the frame cap
            with self.subTest(length=hex(length)):
                client = self.connect()
                client.expect("ready")
                client.sock.sendall(struct.pack(">I", length) + b"\0" * 3)
                self.assertTrue(client.at_eof())

    def test_malformed_file_frames_close_the_connection(self):
        for frame in [{"type": "file_upload", "id": 1, "path": 5, "max_bytes": 1},
                      {"type": "file_download", "id": 1, "path": "x", "max_bytes": -1},
                      {"type": "file_list", "id": "1", "path": "", "max_entries": 1}]:
            with self.subTest(frame=frame):
                client = self.connect()
                client.expect("ready")
                client.send(frame)
                self.assertTrue(client.at_eof())

    def test_files_move_while_code_runs(self):
        self.client.send({"type": "exec", "id": 50, "code": "import time\ntime.sleep(1.5)",
                          "max_output_bytes": 1000})
        done = self.upload("during.txt", b"while running")
        self.assertEqual(done["type"], "file_written")
        self.assertEqual(self.client.expect("done", timeout=10)["id"], 50)


if __name__ == "__main__":
    unittest.main()
