"""Files in and out of the workspace (docs/runner-protocol.md, "Files"): uploads written
to a hidden temporary file and renamed into place, downloads read in chunks, listings.

Every path is relative to the workspace (/workspace in a container). `resolve` walks it
one component at a time from a descriptor of the workspace without following symlinks
(`open_nofollow`: O_NOFOLLOW, and an lstat that must match the opened file), so neither
`..`, an absolute path nor a symlink (which user code may plant anywhere in the
workspace) can lead outside it. The work runs on a thread of its own: file transfers go
on while code runs, and never hold up the reader that delivers interrupts.
"""

import base64
import binascii
import errno
import os
import queue
import stat

from .common import log, start_bare_thread
from .protocol import frame_field

FILE_CHUNK_BYTES = 1024 * 1024          # raw bytes per file_data frame (base64: 1.33 MiB)
MAX_PATH_CHARS = 4096
MAX_OPEN_UPLOADS = 16                   # per connection; more get file_error
TEMP_PREFIX = ".upload-"


class FileOpError(Exception):
    """A file operation failed for a reason the client should hear: `code` is one of
    invalid_argument, not_found, resource_exhausted, failed_precondition."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


def split_path(path, allow_root=False):
    """The components of a workspace-relative path; FileOpError(invalid_argument) for an
    absolute path, `..`, an empty path (unless `allow_root`) or a NUL byte."""
    if not isinstance(path, str) or len(path) > MAX_PATH_CHARS or "\0" in path:
        raise FileOpError("invalid_argument", "path must be a string of at most "
                          f"{MAX_PATH_CHARS} characters without NUL bytes")
    if path.startswith("/"):
        raise FileOpError("invalid_argument",
                          f"{path!r}: paths are relative to the workspace, not absolute")
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise FileOpError("invalid_argument", f"{path!r}: '..' is not allowed")
    if not parts and not allow_root:
        raise FileOpError("invalid_argument", "path names no file")
    return parts


def open_nofollow(parent_fd, name, flags, mode=0o644):
    """os.open of `name` in `parent_fd` that never goes through a symlink: O_NOFOLLOW, and
    the opened file must be the very one lstat saw (gVisor's kernel follows a symlink to a
    directory despite O_NOFOLLOW | O_DIRECTORY; a swap between the two calls is caught
    too). A symlink raises OSError(ELOOP)."""
    try:
        seen = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
    except FileNotFoundError:
        seen = None
        if not flags & os.O_CREAT:
            raise
    if seen is not None and stat.S_ISLNK(seen.st_mode):
        raise OSError(errno.ELOOP, "a symlink", name)
    fd = os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=parent_fd)
    opened = os.fstat(fd)
    now = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
    if stat.S_ISLNK(now.st_mode) or (opened.st_dev, opened.st_ino) != (now.st_dev, now.st_ino) \
            or (seen is not None and (seen.st_dev, seen.st_ino) != (now.st_dev, now.st_ino)):
        os.close(fd)
        raise OSError(errno.ELOOP, "changed into a symlink while being opened", name)
    return fd


def _open_dir(parent_fd, name, create):
    flags = os.O_RDONLY | os.O_DIRECTORY
    try:
        return open_nofollow(parent_fd, name, flags)
    except FileNotFoundError:
        if not create:
            raise
    try:
        os.mkdir(name, 0o755, dir_fd=parent_fd)
    except FileExistsError:
        pass                                 # made meanwhile; the open below decides
    return open_nofollow(parent_fd, name, flags)


def resolve(root, parts, create_dirs=False):
    """A descriptor of the directory holding parts[-1] (of `root` for no parts), walked
    without following symlinks; the caller closes it."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for name in parts[:-1]:
            nxt = _open_dir(fd, name, create_dirs)
            os.close(fd)
            fd = nxt
        return fd
    except BaseException:
        os.close(fd)
        raise


def describe_os_error(exc, path):
    """FileOpError for an OSError met at `path`."""
    if isinstance(exc, FileNotFoundError):
        return FileOpError("not_found", f"{path!r}: no such file or directory")
    if exc.errno in (errno.ELOOP, errno.ENOTDIR) or isinstance(exc, NotADirectoryError):
        return FileOpError("invalid_argument",
                           f"{path!r}: a part of it is a symlink or not a directory")
    if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return FileOpError("resource_exhausted", f"{path!r}: the workspace is full")
    if isinstance(exc, IsADirectoryError):
        return FileOpError("failed_precondition", f"{path!r} is a directory")
    return FileOpError("failed_precondition", f"{path!r}: {exc.strerror or exc}")


class _Upload:
    def __init__(self, path, dir_fd, name, temp_name, fd, max_bytes):
        self.path, self.dir_fd, self.name = path, dir_fd, name
        self.temp_name, self.fd, self.max_bytes = temp_name, fd, max_bytes
        self.size = 0

    def discard(self):
        """Closes the file and removes it: nothing half-written stays behind."""
        for step in (lambda: os.close(self.fd),
                     lambda: os.unlink(self.temp_name, dir_fd=self.dir_fd),
                     lambda: os.close(self.dir_fd)):
            try:
                step()
            except OSError:
                pass


class FileTransfers:
    """Serves the file frames of docs/runner-protocol.md on one worker thread."""

    def __init__(self, root):
        self.root = root
        self._work = queue.Queue()
        self._uploads = {}                   # (conn, id) -> _Upload; worker thread only
        self._failed = set()                 # (conn, id) of uploads that already failed
        start_bare_thread(self._loop)

    def submit(self, conn, frame):
        """From the reader thread: queue a (validated) file frame."""
        self._work.put((conn, frame))

    def connection_lost(self, conn):
        """Uploads of a dead connection are discarded (on the worker thread)."""
        self._work.put((conn, {"type": "_lost"}))

    def _loop(self):
        while True:
            conn, frame = self._work.get()
            try:
                self._handle(conn, frame)
            except Exception as exc:         # a runner bug: report it, keep serving
                log(f"file operation failed internally: {exc!r}")
                if "id" in frame:
                    conn.send({"type": "file_error", "id": frame["id"], "code": "internal",
                               "message": f"internal runner error: {exc!r}"})

    def _handle(self, conn, frame):
        kind = frame["type"]
        if kind == "_lost":
            for key in [k for k in self._uploads if k[0] is conn]:
                self._uploads.pop(key).discard()
            self._failed = {k for k in self._failed if k[0] is not conn}
            return
        key = (conn, frame["id"])
        if kind in ("file_chunk", "file_commit", "file_abort") and key in self._failed:
            if kind != "file_chunk":
                self._failed.discard(key)    # the error was sent; the upload is over
            return
        try:
            if kind == "file_upload":
                self._begin(key, frame)
            elif kind == "file_chunk":
                self._chunk(key, frame)
            elif kind == "file_commit":
                size = self._commit(key)
                conn.send({"type": "file_written", "id": frame["id"], "size": size})
            elif kind == "file_abort":
                upload = self._uploads.pop(key, None)
                if upload:
                    upload.discard()
            elif kind == "file_download":
                self._download(conn, frame)
            elif kind == "file_list":
                self._list(conn, frame)
        except FileOpError as exc:
            upload = self._uploads.pop(key, None)
            if upload:
                upload.discard()
                if kind == "file_chunk":
                    self._failed.add(key)   # its later chunks and commit are ignored
            elif kind == "file_upload":
                self._failed.add(key)
            conn.send({"type": "file_error", "id": frame["id"], "code": exc.code,
                       "message": str(exc)})

    # -- uploads -----------------------------------------------------------------------

    def _begin(self, key, frame):
        path = frame["path"]
        if key in self._uploads:
            raise FileOpError("invalid_argument", f"upload {key[1]} is already open")
        if sum(1 for k in self._uploads if k[0] is key[0]) >= MAX_OPEN_UPLOADS:
            raise FileOpError("resource_exhausted",
                              f"at most {MAX_OPEN_UPLOADS} uploads may be open at once")
        parts = split_path(path)
        try:
            dir_fd = resolve(self.root, parts, create_dirs=True)
        except OSError as exc:
            raise describe_os_error(exc, path) from None
        temp_name = f"{TEMP_PREFIX}{os.getpid()}-{key[1]}-{parts[-1]}"[:255]
        try:
            try:                             # whatever user code left under that name
                os.unlink(temp_name, dir_fd=dir_fd)
            except FileNotFoundError:
                pass
            fd = open_nofollow(dir_fd, temp_name, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        except OSError as exc:
            os.close(dir_fd)
            raise describe_os_error(exc, path) from None
        self._uploads[key] = _Upload(path, dir_fd, parts[-1], temp_name, fd,
                                     frame["max_bytes"])

    def _chunk(self, key, frame):
        upload = self._uploads.get(key)
        if upload is None:
            raise FileOpError("failed_precondition", f"no open upload {key[1]}")
        data = frame["data"]
        if isinstance(data, str):
            try:
                data = base64.b64decode(data, validate=True)
            except (binascii.Error, ValueError):
                raise FileOpError("invalid_argument", "file_chunk.data is not base64") from None
        if upload.size + len(data) > upload.max_bytes:
            raise FileOpError("resource_exhausted", f"{upload.path!r}: larger than the "
                              f"{upload.max_bytes} byte cap")
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(upload.fd, view):]
        except OSError as exc:
            raise describe_os_error(exc, upload.path) from None
        upload.size += len(data)

    def _commit(self, key):
        upload = self._uploads.pop(key, None)
        if upload is None:
            raise FileOpError("failed_precondition", f"no open upload {key[1]}")
        try:
            # Replaces a file (or a symlink itself, never its target) of that name; a
            # directory there fails with EISDIR.
            os.rename(upload.temp_name, upload.name, src_dir_fd=upload.dir_fd,
                      dst_dir_fd=upload.dir_fd)
        except OSError as exc:
            upload.discard()
            raise describe_os_error(exc, upload.path) from None
        size = upload.size
        os.close(upload.fd)
        os.close(upload.dir_fd)
        return size

    # -- downloads and listings --------------------------------------------------------

    def _open_file(self, path):
        parts = split_path(path)
        try:
            dir_fd = resolve(self.root, parts)
            try:
                fd = open_nofollow(dir_fd, parts[-1], os.O_RDONLY | os.O_NONBLOCK)
            finally:
                os.close(dir_fd)
        except OSError as exc:
            raise describe_os_error(exc, path) from None
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise FileOpError("failed_precondition", f"{path!r} is not a regular file")
        return fd, st

    def _download(self, conn, frame):
        path, max_bytes = frame["path"], frame["max_bytes"]
        fd, st = self._open_file(path)
        try:
            if st.st_size > max_bytes:
                raise FileOpError("resource_exhausted", f"{path!r} has {st.st_size} bytes, "
                                  f"more than the {max_bytes} byte cap")
            sent = 0
            while True:
                data = os.read(fd, FILE_CHUNK_BYTES)
                if not data:
                    break
                sent += len(data)
                if sent > max_bytes:         # it grew while we read it
                    raise FileOpError("resource_exhausted",
                                      f"{path!r} grew past the {max_bytes} byte cap")
                # The JSON of {"type": "file_data", "id": ..., "data": ...} written out:
                # base64 needs no escaping, and sandboxd decodes this exact layout without
                # a JSON parser (ParseFileDataFrame).
                body = b'{"type":"file_data","id":%d,"data":"%s"}' % (
                    frame["id"], base64.b64encode(data))
                if not conn.send_body(body):
                    return                   # the connection died; nobody to tell
        finally:
            os.close(fd)
        conn.send({"type": "file_read", "id": frame["id"], "size": sent,
                   "mtime_ms": int(st.st_mtime * 1000)})

    def _list(self, conn, frame):
        path, max_entries = frame["path"], frame["max_entries"]
        parts = split_path(path, allow_root=True)
        try:
            fd = resolve(self.root, parts + ["."])   # every part is a directory
        except OSError as exc:
            raise describe_os_error(exc, path) from None
        entries, truncated = [], False
        try:
            with os.scandir(fd) as it:
                for entry in it:
                    if entry.name.startswith(TEMP_PREFIX):
                        continue             # an upload in progress
                    if len(entries) >= max_entries:
                        truncated = True
                        break
                    entries.append(_describe(entry, "/".join(parts + [entry.name])))
        finally:
            os.close(fd)
        entries.sort(key=lambda e: e["path"])
        conn.send({"type": "file_list_result", "id": frame["id"], "entries": entries,
                   "truncated": truncated})


def _describe(entry, path):
    try:
        st = entry.stat(follow_symlinks=False)
    except OSError:
        return {"path": path, "type": "other", "size": 0, "mtime_ms": 0}
    if stat.S_ISREG(st.st_mode):
        kind = "file"
    elif stat.S_ISDIR(st.st_mode):
        kind = "directory"
    elif stat.S_ISLNK(st.st_mode):
        kind = "symlink"
    else:
        kind = "other"
    return {"path": path, "type": kind, "size": st.st_size if kind == "file" else 0,
            "mtime_ms": int(st.st_mtime * 1000)}
