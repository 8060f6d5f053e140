"""Another local user on the node made rungv serve's default socket
directory first (world-writable, or theirs) and listens in it: the client
must refuse it before it connects, or every request — env, stdin and all —
goes to them. No server needed: the attacker's socket is a plain listener
that must never see a connection."""

import os
import socket
import tempfile
import unittest
from unittest import mock

from gvx import GvxError
from gvx._http import Transport, check_private_dir, default_socket, default_state_dir


class DefaultSocketDir(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="gvxpy-")
        self.top = self._tmp.name
        os.chmod(self.top, 0o755)
        self.listeners = []
        env = {"XDG_RUNTIME_DIR": self.top, "TMPDIR": self.top}
        self._env = mock.patch.dict(os.environ, env)
        self._env.start()
        os.environ.pop("GVX_SERVE_SOCKET", None)
        self.dir = os.path.join(self.top, "gvx-serve")

    def tearDown(self):
        for s in self.listeners:
            s.close()
        self._env.stop()
        self._tmp.cleanup()

    def listen(self, mode, uid=None):
        """The default dir with mode (and owner uid), and a listener in it:
        the attacker's server, or ours."""
        os.mkdir(self.dir)
        os.chmod(self.dir, mode)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(os.path.join(self.dir, "serve.sock"))
        s.listen(8)
        s.setblocking(False)
        self.listeners.append(s)
        if uid is not None:
            os.chown(self.dir, uid, uid)
        return s

    def assert_refused(self, listener, *want):
        t = Transport()
        self.assertEqual(t.socket_path, os.path.join(self.dir, "serve.sock"))
        conn = t._connect(None)
        self.addCleanup(conn.close)
        with self.assertRaises(GvxError) as cm:
            conn.connect()
        for w in want:
            self.assertIn(w, str(cm.exception))
        with self.assertRaises(BlockingIOError, msg="the client connected to the attacker's socket"):
            listener.accept()

    def test_world_writable_refused(self):
        s = self.listen(0o777)
        self.assert_refused(s, self.dir + " is owned by uid %d, mode 0777" % os.geteuid(), "not writable by others",
                            "remove it")

    @unittest.skipUnless(os.geteuid() == 0, "not root: another user (nobody) needs root to own the directory")
    def test_other_users_refused(self):
        s = self.listen(0o755, uid=65534)
        self.assert_refused(s, self.dir + " is owned by uid 65534, mode 0755")

    def test_symlink_refused(self):
        real = os.path.join(self.top, "elsewhere")
        os.mkdir(real, 0o700)
        os.symlink(real, self.dir)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(os.path.join(real, "serve.sock"))
        s.listen(8)
        s.setblocking(False)
        self.listeners.append(s)
        self.assert_refused(s, "is a symlink")

    def test_own_private_dir_connects(self):
        s = self.listen(0o700)
        conn = Transport()._connect(None)
        conn.connect()
        try:
            c, _ = s.accept()
            c.close()
        finally:
            conn.close()

    def test_explicit_path_not_judged(self):
        # A path the caller gives is the caller's to choose.
        self.listen(0o777)
        conn = Transport(socket_path=os.path.join(self.dir, "serve.sock"))._connect(None)
        conn.connect()
        conn.close()

    def test_tmp_fallback_exact(self):
        os.environ.pop("XDG_RUNTIME_DIR")
        with mock.patch("os.geteuid", return_value=1000):
            self.assertEqual(default_state_dir(), (os.path.join(self.top, "gvx-serve-1000"), True))
            self.assertEqual(default_socket(), os.path.join(self.top, "gvx-serve-1000", "serve.sock"))
        with mock.patch("os.geteuid", return_value=0):
            self.assertEqual(default_state_dir(), ("/run/gvx", False))
        os.mkdir(self.dir, 0o755)
        os.chmod(self.dir, 0o755)
        with self.assertRaises(GvxError) as cm:
            check_private_dir(self.dir, exact=True)
        self.assertIn("mode 0755: it must be yours (uid %d) and mode 0700 exactly" % os.geteuid(), str(cm.exception))
        os.chmod(self.dir, 0o700)
        os.close(check_private_dir(self.dir, exact=True))


if __name__ == "__main__":
    unittest.main()
