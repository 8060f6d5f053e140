"""The client unpacks archives a hostile guest wrote: these tests are that
guest (no server needed). Each crafted archive tries to write outside the
download directory, leave a way out of it, or exhaust the caller."""

import base64
import io
import os
import stat
import tarfile
import tempfile
import unittest

from gvx import GvxError, untar
from gvx._untar import CappedReader, unpack
from gvx.client import collect


def archive(*entries):
    """A tar of entries: (name, kind, arg) with kind "file" (arg: bytes),
    "dir", "sym" or "hard" (arg: link name), "fifo"; extra TarInfo fields
    as a 4th item (a dict)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for e in entries:
            name, kind, arg = e[:3]
            ti = tarfile.TarInfo(name)
            ti.mtime = 1_600_000_000
            for k, v in (e[3] if len(e) > 3 else {}).items():
                setattr(ti, k, v)
            body = None
            if kind == "file":
                ti.size, body = len(arg), io.BytesIO(arg)
            elif kind == "dir":
                ti.type = tarfile.DIRTYPE
            elif kind == "sym":
                ti.type, ti.linkname = tarfile.SYMTYPE, arg
            elif kind == "hard":
                ti.type, ti.linkname = tarfile.LNKTYPE, arg
            elif kind == "fifo":
                ti.type = tarfile.FIFOTYPE
            elif kind == "chr":
                ti.type, ti.devmajor, ti.devminor = tarfile.CHRTYPE, 1, 3
            tf.addfile(ti, body)
    return buf.getvalue()


class Sandbox(unittest.TestCase):
    """A scratch directory per test: top/dl is where downloads go, top/victim
    a host file outside it that must never change."""

    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.top = self._tmp.name
        self.dl = os.path.join(self.top, "dl")
        self.victim = os.path.join(self.top, "victim")
        with open(self.victim, "wb") as f:
            f.write(b"host data\n")

    def tearDown(self):
        self._tmp.cleanup()

    def outside(self):
        """Everything in top but dl's own tree: what a download must not touch."""
        return sorted(os.listdir(self.top))

    def links_out(self):
        """Symlinks under dl that resolve outside it."""
        root = os.path.realpath(self.dl)
        bad = []
        for d, dirs, files in os.walk(self.dl):
            for n in dirs + files:
                p = os.path.join(d, n)
                if os.path.islink(p):
                    r = os.path.realpath(p)
                    if r != root and not r.startswith(root + os.sep):
                        bad.append((p, os.readlink(p)))
        return bad

    def assertContained(self, data):
        """data is refused, nothing outside dl changes, no way out stays."""
        with self.assertRaises(GvxError) as cm:
            untar(data, self.dl)
        self.assertEqual(self.outside(), ["dl", "victim"])
        with open(self.victim, "rb") as f:
            self.assertEqual(f.read(), b"host data\n")
        self.assertEqual(self.links_out(), [])
        return cm.exception


class TestHostileArchives(Sandbox):
    def test_entry_below_a_link_that_climbs_out(self):
        # x -> . is inside; esc -> x/.. is inside if x is a directory, and
        # its parent once x is the link: the realpath check before
        # extraction let esc/evil land in top.
        e = self.assertContained(archive(("x", "sym", "."), ("esc", "sym", "x/.."), ("esc/evil", "file", b"pwned")))
        self.assertIn("esc", str(e))
        self.assertFalse(os.path.lexists(os.path.join(self.dl, "esc")))

    def test_link_chain_out_is_removed(self):
        # Nothing written through, but links that would lead a later open
        # out of dl: each alone, and a chain whose last hop climbs.
        for entries in (
            [("up", "sym", "../victim")],
            [("abs", "sym", self.victim)],
            [("d", "dir", None), ("d/a", "sym", "../b"), ("b", "sym", "c/../.."), ("c", "dir", None)],
            [("x", "sym", "."), ("esc", "sym", "x/../victim")],
            [("l1", "sym", "l2"), ("l2", "sym", "l1")] + [("up2", "sym", "l3/../..")] + [("l3", "sym", ".")],
        ):
            with self.subTest(entries=entries):
                self.assertContained(archive(*entries))

    def test_skip_outside_links(self):
        # A virtualenv's bin/python -> /usr/bin/python3: left out without
        # an error when the caller asks, the rest unpacked.
        untar(archive(("venv", "dir", None), ("venv/python", "sym", "/usr/bin/python3"),
                      ("venv/up", "sym", "../../victim"), ("venv/ok", "file", b"x")), self.dl, skip_outside_links=True)
        self.assertEqual(sorted(os.listdir(os.path.join(self.dl, "venv"))), ["ok"])
        self.assertEqual(self.links_out(), [])

    def test_names_that_climb(self):
        for name in ("../evil", "a/../../evil", "/" + os.path.join(self.top, "evil"), "./../evil"):
            with self.subTest(name=name):
                self.assertContained(archive(("a", "dir", None), (name, "file", b"pwned")))

    def test_hard_link_out(self):
        for target in ("../victim", self.victim, "s/victim"):
            with self.subTest(target=target):
                # s -> .. is refused in the end; the hard link through it
                # must not be made first.
                self.assertContained(archive(("s", "sym", ".."), ("h", "hard", target)))

    def test_existing_link_is_replaced_not_followed(self):
        os.makedirs(self.dl)
        os.symlink(self.victim, os.path.join(self.dl, "f"))
        os.symlink(self.top, os.path.join(self.dl, "d"))
        untar(archive(("f", "file", b"new")), self.dl)
        with open(self.victim, "rb") as f:
            self.assertEqual(f.read(), b"host data\n")
        self.assertFalse(os.path.islink(os.path.join(self.dl, "f")))
        with open(os.path.join(self.dl, "f"), "rb") as f:
            self.assertEqual(f.read(), b"new")
        # A directory entry below an existing link is refused, not followed.
        with self.assertRaises(GvxError):
            untar(archive(("d/evil", "file", b"pwned")), self.dl)
        self.assertFalse(os.path.exists(os.path.join(self.top, "evil")))

    def test_modes_devices_and_fifos(self):
        untar(archive(("suid", "file", b"#!/bin/sh\n", {"mode": 0o6755, "uid": 0, "gid": 0}),
                      ("p", "fifo", None), ("null", "chr", None),
                      ("ro", "dir", None, {"mode": 0o500}), ("ro/f", "file", b"x", {"mode": 0o400})), self.dl)
        st = os.stat(os.path.join(self.dl, "suid"))
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o755)  # setuid and setgid dropped
        self.assertEqual(st.st_uid, os.getuid())
        self.assertEqual(int(st.st_mtime), 1_600_000_000)
        self.assertFalse(os.path.lexists(os.path.join(self.dl, "p")))
        self.assertFalse(os.path.lexists(os.path.join(self.dl, "null")))
        self.assertEqual(stat.S_IMODE(os.stat(os.path.join(self.dl, "ro")).st_mode), 0o700)
        self.assertEqual(stat.S_IMODE(os.stat(os.path.join(self.dl, "ro", "f")).st_mode), 0o400)


class TestExhaustion(Sandbox):
    def test_max_bytes(self):
        data = archive(("big", "file", b"\0" * (1 << 20)))
        with self.assertRaises(GvxError) as cm:
            unpack(io.BytesIO(data), self.dl, 64 << 10)
        self.assertIn("max_bytes", str(cm.exception))
        self.assertEqual(unpack(io.BytesIO(data), os.path.join(self.top, "ok"), len(data)), 1)

    def test_huge_extended_header(self):
        # A pax header tarfile would read whole: 16 MiB of it is refused
        # before it is read.
        data = archive(("f", "file", b"x", {"pax_headers": {"comment": "y" * (16 << 20)}}))
        e = self.assertContained(data)
        self.assertIn("pax header", str(e))

    def test_garbage(self):
        for data in (b"\x01" * 4096, archive(("f", "file", b"abc"))[:700], b"x"):
            with self.subTest(n=len(data)):
                self.assertContained(data)

    def test_capped_reader(self):
        self.assertEqual(CappedReader(io.BytesIO(b"abc"), 3, "x").read(), b"abc")
        with self.assertRaises(GvxError):
            CappedReader(io.BytesIO(b"abcd"), 3, "x").read()
        self.assertEqual(CappedReader(io.BytesIO(b"abcd"), None, "x").read(), b"abcd")

    def test_exec_output_capped(self):
        chunk = base64.b64encode(b"y" * 1000).decode()
        events = [{"type": "stdout", "data": chunk}] * 50 + [{"type": "stderr", "data": chunk},
                                                             {"type": "exit", "exit_code": 0}]
        seen = []
        r = collect(iter(events), lambda s, b: seen.append(len(b)), max_output=4500)
        self.assertEqual((len(r.stdout), len(r.stderr), r.truncated), (4500, 1000, True))
        self.assertEqual(sum(seen), 51000)
        r = collect(iter(events), max_output=None)
        self.assertEqual((len(r.stdout), r.truncated), (50000, False))


def raw_header(name, typ, size=0, linkname=""):
    """One ustar header block of type typ, as tarfile writes a regular one."""
    ti = tarfile.TarInfo(name)
    ti.size, ti.mtime, ti.linkname = size, 1, linkname
    buf = bytearray(ti.tobuf(tarfile.USTAR_FORMAT))
    buf[156:157] = typ
    buf[148:156] = b" " * 8
    buf[148:156] = b"%06o\0 " % sum(buf)
    return bytes(buf)


def pax_entry(headers, name="f", body=b"x"):
    """A pax header with headers (raw records allowed: bytes), then a
    regular file."""
    recs = b""
    for k, v in headers.items():
        rec = b" %s=%s\n" % (k.encode(), v if isinstance(v, bytes) else v.encode())
        n = len(rec) + 1
        n = len(rec) + len(str(n + len(str(n)) - 1))
        recs += str(n).encode() + rec
    return (raw_header("././@PaxHeader", b"x", len(recs)) + recs + b"\0" * (-len(recs) % 512)
            + raw_header(name, b"0", len(body)) + body + b"\0" * (-len(body) % 512))


class TestExoticMembers(Sandbox):
    """Members tarfile would expand in memory, or that this client does not
    unpack: refused before tarfile processes them."""

    def test_refused_types(self):
        end = b"\0" * 1024
        for typ, what in ((b"S", "GNU sparse file"), (b"M", "multi-volume"), (b"7", "contiguous file"),
                          (b"V", "volume header"), (b"g", "global pax header"), (b"X", "Solaris"),
                          (b"N", "old GNU long name"), (b"D", "dump directory"), (b"Q", "type b'Q'")):
            with self.subTest(typ=typ):
                e = self.assertContained(raw_header("ok", b"0", 1) + b"1" + b"\0" * 511
                                         + raw_header("m", typ, 512) + b"\0" * 512 + end)
                self.assertIn(what, str(e))
                self.assertIn("archive refused", str(e))

    def test_pax_sparse(self):
        # GNU sparse 0.0 and 0.1 keep their maps in the pax header, 1.0 in
        # the data: all refused at the first GNU.sparse keyword.
        for hdr in ({"GNU.sparse.size": "1000000000", "GNU.sparse.numblocks": "1",
                     "GNU.sparse.offset": "0", "GNU.sparse.numbytes": "1"},
                    {"GNU.sparse.map": ",".join(["1"] * 10000), "GNU.sparse.realsize": "1000000000"},
                    {"GNU.sparse.major": "1", "GNU.sparse.minor": "0", "GNU.sparse.name": "f"}):
            with self.subTest(keys=sorted(hdr)):
                e = self.assertContained(pax_entry(hdr) + b"\0" * 1024)
                self.assertIn("GNU sparse file", str(e))

    def test_pax_records(self):
        # A record whose length runs past the header, has no '=', or a
        # header of digits (tarfile's hdrcharset search backtracks on it
        # quadratically before Python 3.11.10): refused in one pass.
        for bad in (b"99 path=x\n", b"6 ab\n", b"1" * (256 << 10), b"5 =x\n"):
            with self.subTest(bad=bad[:10]):
                data = raw_header("././@PaxHeader", b"x", len(bad)) + bad + b"\0" * (-len(bad) % 512)
                data += raw_header("f", b"0") + b"\0" * 1024
                e = self.assertContained(data)
                self.assertIn("pax header record", str(e))

    def test_pax_ordinary(self):
        # What Go's archive/tar writes (long names, times, a binary name) still unpacks.
        long = "d/" + "n" * 200
        untar(pax_entry({"path": long, "mtime": "1600000000.5", "linkpath": ""}, "ignored", b"abc")
              + pax_entry({"hdrcharset": "BINARY", "path": b"bin\xffname"}, "ignored2", b"z") + b"\0" * 1024,
              self.dl)
        with open(os.path.join(self.dl, long), "rb") as f:
            self.assertEqual(f.read(), b"abc")
        self.assertTrue(os.path.exists(os.path.join(self.dl.encode(), b"bin\xffname")))

    def test_extended_header_chain(self):
        # Each extended header is held while the next is read: a chain of
        # them is cut at a few.
        link = b"t" * 100
        one = raw_header("././@LongLink", b"K", len(link)) + link + b"\0" * (512 - len(link))
        e = self.assertContained(one * 10 + raw_header("f", b"0") + b"\0" * 1024)
        self.assertIn("extended headers", str(e))

    def test_long_names(self):
        name = b"a/" * 2100 + b"f"
        e = self.assertContained(raw_header("././@LongLink", b"L", len(name)) + name + b"\0" * (-len(name) % 512)
                                 + raw_header("f", b"0") + b"\0" * 1024)
        self.assertIn("GNU long name", str(e))
        e = self.assertContained(pax_entry({"path": name.decode()}) + b"\0" * 1024)
        self.assertIn("longer than 4096", str(e))

    def test_max_members(self):
        data = archive(*[("f%d" % i, "file", b"") for i in range(11)])
        with self.assertRaises(GvxError) as cm:
            unpack(io.BytesIO(data), self.dl, None, max_members=10)
        self.assertIn("max_members=10", str(cm.exception))
        self.assertEqual(unpack(io.BytesIO(data), os.path.join(self.top, "ok"), None, max_members=11), 11)

    def test_deep_zigzag(self):
        # Entries that alternate between two directories 300 deep make
        # every entry open 300 directories: refused once the directory opens
        # pass 16 per entry (a tree-ordered archive opens each about once).
        a, b = "a/" * 300, "b/" * 300
        data = archive(*[(f"{a if i % 2 else b}f{i}", "file", b"") for i in range(200)])
        e = self.assertContained(data)
        self.assertIn("jump between deep directories", str(e))
        # In tree order, the same entries unpack.
        data = archive(*sorted([(f"{a if i % 2 else b}f{i}", "file", b"") for i in range(200)]))
        self.assertEqual(unpack(io.BytesIO(data), os.path.join(self.top, "ok")), 200)

    def test_repeated_directories(self):
        # A directory sent again is not made again: its last header's mode
        # and time win, and it costs nothing to remember.
        data = archive(("d", "dir", None, {"mode": 0o700}), ("d/f", "file", b"1"), ("d", "dir", None, {"mode": 0o750}),
                       ("d", "dir", None, {"mode": 0o755, "mtime": 1_500_000_000}))
        self.assertEqual(unpack(io.BytesIO(data), self.dl), 4)
        st = os.stat(os.path.join(self.dl, "d"))
        self.assertEqual((stat.S_IMODE(st.st_mode), int(st.st_mtime)), (0o755, 1_500_000_000))

    def test_walk_between_directories(self):
        # The parent kept open from one entry to the next is the right one
        # when entries go back up, sideways and down again.
        names = ["a/b/c/f1", "a/b/f2", "a/x/f3", "a/b/c/f4", "f5", "a/b/c/d/e/f6", "a/f7"]
        untar(archive(*[(n, "file", n.encode()) for n in names]), self.dl)
        for n in names:
            with open(os.path.join(self.dl, n), "rb") as f:
                self.assertEqual(f.read(), n.encode())
        # ...and a symlink made over a kept directory's path is refused, not followed.
        e = self.assertContained(archive(("a/b/f", "file", b"1"), ("a/b", "sym", "../.."), ("a/b/g", "file", b"2")))
        self.assertIn("directory is in the way", str(e))


class TestOrdinaryArchives(Sandbox):
    def test_tree_round_trip(self):
        n = untar(archive(("proj", "dir", None, {"mode": 0o750}), ("proj/pkg", "dir", None),
                          ("proj/pkg/a.py", "file", b"print('a')\n"),
                          ("proj/run.sh", "file", b"#!/bin/sh\n", {"mode": 0o755}),
                          ("proj/link", "sym", "pkg/a.py"), ("proj/self", "sym", "."),
                          ("proj/up", "sym", "../proj/pkg"), ("proj/hard", "hard", "proj/pkg/a.py")), self.dl)
        self.assertIsNone(n)
        p = os.path.join(self.dl, "proj")
        with open(os.path.join(p, "link")) as f:
            self.assertEqual(f.read(), "print('a')\n")
        self.assertEqual(os.readlink(os.path.join(p, "up")), "../proj/pkg")
        self.assertEqual(os.stat(os.path.join(p, "hard")).st_ino, os.stat(os.path.join(p, "pkg", "a.py")).st_ino)
        self.assertTrue(os.access(os.path.join(p, "run.sh"), os.X_OK))
        self.assertEqual(stat.S_IMODE(os.stat(p).st_mode), 0o750)
        self.assertEqual(int(os.stat(p).st_mtime), 1_600_000_000)
        # Downloading again over the first copy replaces it.
        untar(archive(("proj/pkg/a.py", "file", b"v2")), self.dl)
        with open(os.path.join(p, "hard")) as f:
            self.assertEqual(f.read(), "print('a')\n")  # a new file, not a write into the old inode
        with open(os.path.join(p, "pkg", "a.py")) as f:
            self.assertEqual(f.read(), "v2")


if __name__ == "__main__":
    unittest.main()
