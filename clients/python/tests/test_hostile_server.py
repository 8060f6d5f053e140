"""The client against a server that answers as a hostile guest would make
it: a privileged guest can take its agent's listening socket and answer
the client's write_file, upload and download itself, through the server's
proxy. These tests are that answer, from a fake server on 127.0.0.1 (no
sandbox needed): each operation runs in a child process that measures its
own peak memory, and must end in a clear GvxError in well under 300 MiB.

The answers are streamed as they are read, never held whole by the fake
server: a 1.5 GB JSON answer, sparse-file tars whose maps tarfile would
expand, a million repeated directory headers."""

import json
import os
import subprocess
import sys
import tarfile
import tempfile
import threading
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
CLIENT = os.path.abspath(os.path.join(HERE, ".."))

# The most a child may use, in MiB. Python with the client loaded is about
# 20; the attacks below cost today's client 0.5 to 1.5 GiB.
MAX_RSS_MIB = 300


def _chksum(buf: bytearray) -> None:
    buf[148:156] = b" " * 8
    buf[148:156] = b"%06o\0 " % sum(buf)


def _octal(n: int, width: int) -> bytes:
    return b"%0*o\0" % (width - 1, n)


def gnu_sparse_bomb(blocks: int):
    """An old-GNU sparse member ('S') whose map goes on for blocks extension
    blocks of 21 entries each: tarfile reads every entry into a tuple while
    it parses the header."""
    ti = tarfile.TarInfo("bomb")
    ti.type, ti.size, ti.mtime = tarfile.GNUTYPE_SPARSE, 0, 1
    hdr = bytearray(ti.tobuf(tarfile.GNU_FORMAT))
    entry = _octal(0o1234567, 12) + _octal(0o7654321, 12)
    hdr[386:386 + 96] = entry * 4
    hdr[482] = 1  # isextended
    hdr[483:495] = _octal(1 << 20, 12)  # realsize
    _chksum(hdr)
    more = entry * 21 + b"\0" * 8
    yield bytes(hdr)
    chunk = (more[:504] + b"\x01" + b"\0" * 7) * 2048
    left = blocks - 1
    while left > 0:
        k = min(left, 2048)
        yield chunk[:k * 512]
        left -= k
    yield more[:504] + b"\0" * 8  # the last: not extended
    yield b"\0" * 1024


def pax10_sparse_bomb(numbers: int):
    """A pax GNU sparse 1.0 member: its map, in the data, says it has a
    billion entries and then lists numbers of them; tarfile reads them all
    while it parses the header."""
    ti = tarfile.TarInfo("GNUSparseFile.0/bomb")
    ti.size, ti.mtime = 400 << 20, 1
    ti.pax_headers = {"GNU.sparse.major": "1", "GNU.sparse.minor": "0", "GNU.sparse.name": "bomb",
                      "GNU.sparse.realsize": str(1 << 20)}
    yield ti.tobuf(tarfile.PAX_FORMAT)
    yield b"999999999\n"
    chunk = b"1234567\n" * 131072
    for _ in range(numbers // 131072):
        yield chunk


def repeated_dirs(n: int):
    """n entries: n-1 headers of the one directory d, then a file in it."""
    n -= 1
    ti = tarfile.TarInfo("d")
    ti.type, ti.mtime = tarfile.DIRTYPE, 1
    chunk = ti.tobuf(tarfile.USTAR_FORMAT) * 2048
    while n > 0:
        k = min(n, 2048)
        yield chunk[:k * 512]
        n -= k
    f = tarfile.TarInfo("d/f")
    f.size, f.mtime = 2, 1
    yield f.tobuf(tarfile.USTAR_FORMAT) + b"ok" + b"\0" * 510 + b"\0" * 1024


def spaces(n: int):
    """n bytes of JSON whitespace, a MiB at a time."""
    mib = b" " * (1 << 20)
    while n > 0:
        yield mib[:n]
        n -= len(mib)


ANSWERS = {
    # episode id: (Content-Length or None for an answer that ends with the connection, body)
    "json-long": lambda: (1_500_000_000, spaces(1_500_000_000)),
    "json-close": lambda: (None, spaces(1_500_000_000)),
    "gnusparse": lambda: (None, gnu_sparse_bomb(200_000)),
    "pax10": lambda: (None, pax10_sparse_bomb(12_000_000)),
    "dirs": lambda: (None, repeated_dirs(1_000_000)),
    "line": lambda: (None, spaces(200 << 20)),
}


class _Handler(BaseHTTPRequestHandler):
    def _answer(self):
        n = int(self.headers.get("Content-Length") or 0)
        while n > 0:
            n -= len(self.rfile.read(min(n, 1 << 20)))
        ep = self.path.split("/")[3]
        length, body = ANSWERS[ep]()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if length is not None:
            self.send_header("Content-Length", str(length))
        self.send_header("Connection", "close")
        self.end_headers()
        try:
            for b in body:
                self.wfile.write(b)
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.close_connection = True

    do_GET = do_PUT = do_POST = _answer

    def log_message(self, *a):
        pass


# The child: runs one operation against the fake server and prints what
# happened and its peak memory.
CHILD = r"""
import json, resource, sys, tempfile
sys.path.insert(0, sys.argv[1])
import gvx
from gvx.client import Episode
url, ep, op = sys.argv[2:5]
c = gvx.Client(url=url)
e = Episode(c.transport, {"id": ep}, keepalive=False)
err = None
try:
    with tempfile.TemporaryDirectory() as d:
        if op == "write_file":
            e.write_file("/x", b"data")
        elif op == "upload_tar":
            e.upload_tar(b"", "/x")
        elif op == "download":
            e.download("/x", d)
        elif op == "exec":
            e.exec("true")
except gvx.GvxError as x:
    err = str(x)
except BaseException as x:
    err = "NOT A GvxError: %s: %s" % (type(x).__name__, str(x)[:500])
print(json.dumps({"error": err, "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


class TestHostileAnswers(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        cls.srv.daemon_threads = True
        cls.url = "http://127.0.0.1:%d" % cls.srv.server_address[1]
        cls.thread = threading.Thread(target=cls.srv.serve_forever, daemon=True)
        cls.thread.start()

    @classmethod
    def tearDownClass(cls):
        cls.srv.shutdown()
        cls.srv.server_close()

    def run_child(self, ep: str, op: str) -> dict:
        with tempfile.TemporaryDirectory() as home:
            r = subprocess.run([sys.executable, "-c", CHILD, CLIENT, self.url, ep, op], capture_output=True,
                               text=True, timeout=600, env=dict(os.environ, HOME=home))
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        out = json.loads(r.stdout.strip().splitlines()[-1])
        self.assertLess(out["rss_mib"], MAX_RSS_MIB, f"{op} on {ep}: peak memory {out['rss_mib']:.0f} MiB")
        return out

    def test_huge_json_answer(self):
        # write_file and upload_tar read the agent's JSON answer: 1.5 GB of
        # it (with a length, and without: until the connection ends) is
        # refused after 1 MiB, unread.
        for ep in ("json-long", "json-close"):
            for op in ("write_file", "upload_tar"):
                with self.subTest(ep=ep, op=op):
                    out = self.run_child(ep, op)
                    self.assertIsNotNone(out["error"])
                    self.assertIn("larger than 1048576 bytes", out["error"])
                    self.assertIn("max_json", out["error"])

    def test_gnu_sparse_bomb(self):
        # 100 MB of old-GNU sparse map: 4.2 million entries tarfile would
        # hold as tuples, refused at the header.
        out = self.run_child("gnusparse", "download")
        self.assertIsNotNone(out["error"])
        self.assertIn("GNU sparse file", out["error"])

    def test_pax_sparse_bomb(self):
        # GNU sparse 1.0 (pax): a map of a billion entries, 96 MB of them
        # sent; refused at its pax header, before the map is read.
        out = self.run_child("pax10", "download")
        self.assertIsNotNone(out["error"])
        self.assertIn("GNU sparse file", out["error"])

    def test_million_repeated_directories(self):
        # One directory's header a million times (the most entries a
        # download takes by default): remembered once (the client kept every
        # TarInfo and every header's record: 624 MiB).
        out = self.run_child("dirs", "download")
        self.assertIsNone(out["error"])

    def test_endless_exec_line(self):
        # An exec answer whose first line never ends: refused at 64 MiB
        # with an error that says so (not a JSON error on a cut line).
        out = self.run_child("line", "exec")
        self.assertIsNotNone(out["error"])
        self.assertIn("longer than", out["error"])
        self.assertFalse(out["error"].startswith("NOT A"), out["error"])


if __name__ == "__main__":
    unittest.main()
