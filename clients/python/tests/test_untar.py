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
