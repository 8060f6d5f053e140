"""Test fixtures: a real rungv serve, the busybox image and a golden volume,
built from the repository with the Go toolchain (or given by environment:
GVX_RUNGV, GVX_TEST_IMAGE, GVX_TEST_GOLDEN)."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.abspath(os.path.join(HERE, "..")))

import gvx  # noqa: E402


class Fixture:
    """What the suite shares, made once: rungv, the image, the golden volume."""

    work = None
    rungv = None
    image = None
    golden = None
    skip = None

    @classmethod
    def get(cls) -> "Fixture":
        if cls.work is None and cls.skip is None:
            try:
                cls._make()
            except unittest.SkipTest as e:
                cls.skip = str(e)
        if cls.skip:
            raise unittest.SkipTest(cls.skip)
        return cls

    @classmethod
    def _go(cls, *args: str) -> None:
        env = dict(os.environ, CGO_ENABLED="0")
        r = subprocess.run(["go", *args], cwd=REPO, env=env, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"go {' '.join(args)}: {r.stdout}{r.stderr}")
        return r

    @classmethod
    def _make(cls) -> None:
        # Sockets live under work: keep its path short.
        cls.work = tempfile.mkdtemp(prefix="gvxpy-", dir="/tmp")
        need_go = not (os.environ.get("GVX_RUNGV") and os.environ.get("GVX_TEST_IMAGE") and os.environ.get("GVX_TEST_GOLDEN"))
        if need_go and shutil.which("go") is None:
            raise unittest.SkipTest("no go toolchain to build rungv (or set GVX_RUNGV, GVX_TEST_IMAGE, GVX_TEST_GOLDEN)")
        cls.rungv = os.environ.get("GVX_RUNGV")
        if not cls.rungv:
            cls.rungv = os.path.join(cls.work, "rungv")
            cls._go("build", "-o", cls.rungv, "./cmd/rungv")
        if os.getuid() != 0:
            iso = cls.isolation()
            if not iso.get("user_namespaces"):
                raise unittest.SkipTest("no user namespaces for a rootless sandbox here: "
                                        + iso.get("user_namespaces_error", "?"))
        cls.image = os.environ.get("GVX_TEST_IMAGE")
        if not cls.image:
            layout = os.path.join(cls.work, "busybox")
            try:
                cls._go("run", "./runtime/runtimetest/mk", layout)
            except RuntimeError as e:
                if "busybox" in str(e):
                    raise unittest.SkipTest(f"no static busybox for the test image: {e}")
                raise
            cls.image = "oci:" + layout
        cls.golden = os.environ.get("GVX_TEST_GOLDEN")
        if not cls.golden:
            tree = os.path.join(cls.work, "tree")
            os.makedirs(tree)
            with open(os.path.join(tree, "golden.txt"), "w") as f:
                f.write("gv\n")
            cls.golden = os.path.join(cls.work, "golden.ext4")
            cls._go("run", "./cmd/gvx-vol", "create", "--size", "128M", "--from", tree, cls.golden)

    _isolation = None

    @classmethod
    def isolation(cls) -> dict:
        """rungv info's isolation probe for this user (what --isolation auto
        picks and why, naming the sysctl or chroot that refuses a user
        namespace): the code rungv run itself uses."""
        if cls._isolation is None:
            r = subprocess.run([cls.rungv, "info", "--json"], capture_output=True, text=True)
            if r.returncode != 0:
                raise RuntimeError(f"{cls.rungv} info --json: {r.stdout}{r.stderr}")
            cls._isolation = json.loads(r.stdout)["isolation"]
        return cls._isolation

    @classmethod
    def need_namespaces(cls, what: str) -> None:
        """Skips, with rungv's reason and fix, where rungv cannot use
        namespaces here (--isolation auto runs seccomp-only), which what
        needs."""
        iso = cls.isolation()
        if iso.get("mode") != "namespaces":
            raise unittest.SkipTest(f"{what} needs rungv's namespaces, and --isolation auto runs "
                                    f"{iso.get('mode')} here: {iso.get('why')}")

    @classmethod
    def cleanup(cls) -> None:
        """Removes what _make made; a later get() makes it again (a module
        that ran after test_serve's cleanup used to find rungv gone)."""
        if cls.work:
            shutil.rmtree(cls.work, ignore_errors=True)
        cls.work = cls.rungv = cls.image = cls.golden = cls._isolation = None


class Server:
    """A rungv serve subprocess on its own state dir and socket."""

    def __init__(self, name: str, *flags: str):
        fx = Fixture.get()
        self.dir = os.path.join(fx.work, name)
        os.makedirs(self.dir)
        self.log = open(os.path.join(self.dir, "serve.log"), "w+")
        self.proc = subprocess.Popen(
            [fx.rungv, "serve", "--state-dir", os.path.join(self.dir, "st"), "--clone", "auto", *flags],
            stdout=subprocess.PIPE, stderr=self.log, text=True)
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait()
            self.log.seek(0)
            raise RuntimeError(f"rungv serve did not start: {self.log.read()}")
        self.hello = json.loads(line)
        self.socket = self.hello["socket"]
        self.client = gvx.Client(self.socket)

    def logs(self) -> str:
        self.log.flush()
        with open(self.log.name) as f:
            return f.read()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()
        self.log.close()
