"""End-to-end tests of the Python client against a real rungv serve running
busybox episodes in gVisor sandboxes."""

import asyncio
import glob
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

from .helpers import HERE, REPO, Fixture, Server

import gvx
from gvx import swerex


def setUpModule():
    global SERVER
    Fixture.get()
    SERVER = Server("main", "--max-episodes", "12")


def tearDownModule():
    SERVER.stop()
    Fixture.cleanup()


class TestEpisodes(unittest.TestCase):
    def test_concurrent_episodes_asyncio(self):
        """8 episodes created at once from one golden volume, each runs a command."""
        fx = Fixture.get()

        async def one(c, i):
            async with await c.create(fx.image, golden=fx.golden, env={"N": str(i)}) as ep:
                r = await ep.exec("cat /var/lib/docker/golden.txt; echo ep-$N; touch /var/lib/docker/mine-$N; ls /var/lib/docker")
                return ep.id, r

        async def main():
            async with gvx.AsyncClient(SERVER.socket) as c:
                t0 = time.monotonic()
                res = await asyncio.gather(*(one(c, i) for i in range(8)))
                return res, time.monotonic() - t0

        res, wall = asyncio.run(main())
        self.assertEqual(len({eid for eid, _ in res}), 8)
        for i, (_, r) in enumerate(res):
            self.assertEqual(r.exit_code, 0, r)
            lines = r.stdout.decode().split()
            self.assertEqual(lines[:2], ["gv", f"ep-{i}"])
            # Each clone has its own file only: the golden and the others are untouched.
            self.assertEqual(sorted(x for x in lines[2:] if x.startswith("mine-")), [f"mine-{i}"])
        print(f"\n8 concurrent episodes: {wall:.2f}s create+exec+close", file=sys.stderr)
        self.assertEqual(SERVER.client.list(), [])

    def test_fork(self):
        """A forkable episode forked into 2: each child has the parent's file
        and its still-running process, and writes only to its own clone."""
        fx = Fixture.get()
        with SERVER.client.create(fx.image, golden=fx.golden, forkable=True) as ep:
            ep.exec("echo prefix > /var/lib/docker/p.txt; (i=0; while :; do i=$((i+1)); echo $i > /var/lib/docker/tick; sleep 0.02; done) >/dev/null 2>&1 </dev/null &").check()
            time.sleep(0.2)
            kids = ep.fork(2)
            try:
                self.assertEqual(len({k.id for k in kids} | {ep.id}), 3)
                for k in kids:
                    self.assertEqual(k.info.get("parent"), ep.id)
                    self.assertEqual(k.read_file("/var/lib/docker/p.txt"), b"prefix\n")
                    # The process goes on: its count moves past the one read
                    # first. Waited for rather than slept on: a restored
                    # child's first fork and exec (lazy restore, a loaded
                    # machine) once took longer than a fixed 0.2 s.
                    t1 = k.read_file("/var/lib/docker/tick")
                    deadline = time.monotonic() + 60
                    while k.read_file("/var/lib/docker/tick") == t1:
                        self.assertLess(time.monotonic(), deadline,
                                        f"the parent's process did not go on in the child: its count stayed {t1!r} for 60 s")
                        time.sleep(0.05)
                    k.write_file("/var/lib/docker/own", k.id)
                for k in kids:
                    self.assertEqual(k.read_file("/var/lib/docker/own"), k.id.encode())
                self.assertNotEqual(ep.exec("test -e /var/lib/docker/own").exit_code, 0)
                with self.assertRaises(gvx.GvxError) as cm:
                    ep.fork(1)
                self.assertEqual(cm.exception.status, 409)
            finally:
                for k in kids:
                    k.close()

    def test_exec_details(self):
        fx = Fixture.get()
        with SERVER.client.create(fx.image) as ep:
            r = ep.exec(["sh", "-c", "cat; echo $K; pwd; echo e >&2; exit 4"], env={"K": "v"}, workdir="/tmp", stdin=b"in\n")
            self.assertEqual((r.exit_code, r.stdout, r.stderr), (4, b"in\nv\n/tmp\n", b"e\n"))
            r = ep.exec("sleep 20", timeout=0.5)
            self.assertTrue(r.timed_out)
            self.assertEqual(r.exit_code, 137)
            seen = []
            ep.exec("for i in 1 2 3; do echo $i; done", on_output=lambda s, b: seen.append((s, b)))
            self.assertEqual(b"".join(b for _, b in seen), b"1\n2\n3\n")
        with self.assertRaises(gvx.NotFoundError):
            ep.exec("true")

    def test_golden_durability(self):
        """golden_durability "episode" (the default) and "full": the
        golden's clone takes writes and fsyncs either way (episode skips
        only the host fsyncs); a value the server does not know is
        refused, naming the field."""
        fx = Fixture.get()
        for durability in ("episode", "full"):
            with SERVER.client.create(fx.image, golden=fx.golden, golden_durability=durability) as ep:
                r = ep.exec("echo kept > /var/lib/docker/d.txt && sync && cat /var/lib/docker/d.txt /var/lib/docker/golden.txt")
                self.assertEqual(r.exit_code, 0, (durability, r.stderr))
                self.assertTrue(r.stdout.startswith(b"kept\n"), (durability, r.stdout))
        with self.assertRaises(gvx.GvxError) as cm:
            SERVER.client.create(fx.image, golden=fx.golden, golden_durability="sometimes")
        self.assertIn("golden_durability", str(cm.exception))

    def test_files_round_trip(self):
        """Files round-trip byte-identical, a 64 MiB one too; trees by upload/download."""
        fx = Fixture.get()
        big = os.urandom(64 << 20)
        with SERVER.client.create(fx.image, golden=fx.golden) as ep:
            t0 = time.monotonic()
            ep.write_file("/var/lib/docker/big.bin", big, mode=0o600)
            t1 = time.monotonic()
            got = ep.read_file("/var/lib/docker/big.bin")
            t2 = time.monotonic()
            self.assertEqual(len(got), len(big))
            self.assertTrue(got == big, "64 MiB file differs after the round trip")
            print(f"\n64 MiB: write {64 / (t1 - t0):.0f} MiB/s, read {64 / (t2 - t1):.0f} MiB/s", file=sys.stderr)
            r = ep.exec("sha256sum /var/lib/docker/big.bin; stat -c %a /var/lib/docker/big.bin")
            import hashlib
            self.assertEqual(r.stdout.decode().split()[0], hashlib.sha256(big).hexdigest())
            self.assertEqual(r.stdout.decode().split()[-1], "600")

            with tempfile.TemporaryDirectory() as d:
                src = os.path.join(d, "proj")
                os.makedirs(os.path.join(src, "pkg"))
                with open(os.path.join(src, "pkg", "a.py"), "w") as f:
                    f.write("print('a')\n")
                with open(os.path.join(src, "run.sh"), "w") as f:
                    f.write("#!/bin/sh\necho run\n")
                os.chmod(os.path.join(src, "run.sh"), 0o755)
                os.symlink("pkg/a.py", os.path.join(src, "link"))
                ep.upload(src, "/work")
                self.assertEqual(ep.exec("/work/proj/run.sh; cat /work/proj/link").stdout, b"run\nprint('a')\n")
                out = ep.download("/work/proj", os.path.join(d, "back"))
                with open(os.path.join(out, "pkg", "a.py")) as f:
                    self.assertEqual(f.read(), "print('a')\n")
                self.assertTrue(os.access(os.path.join(out, "run.sh"), os.X_OK))
                self.assertEqual(os.readlink(os.path.join(out, "link")), "pkg/a.py")
            with self.assertRaises(gvx.NotFoundError):
                ep.read_file("/no/such/file")

    def test_hostile_guest_downloads(self):
        """A guest's tree with links that lead out of the download (through
        other links too) is refused and leaves no way out; a file or an
        output larger than the caller's cap is an error or truncated, not
        a giant allocation."""
        fx = Fixture.get()
        with SERVER.client.create(fx.image) as ep, tempfile.TemporaryDirectory() as d:
            ep.exec("mkdir -p /h/sub && echo ok >/h/sub/f && cd /h && ln -s . x && ln -s x/../.. esc && "
                    "ln -s /etc/passwd abs && ln -s sub/f in && head -c 2000000 /dev/zero >/big").check()
            with open(os.path.join(d, "victim"), "w") as f:
                f.write("host\n")
            dl = os.path.join(d, "dl")
            with self.assertRaises(gvx.GvxError) as cm:
                ep.download("/h", dl)
            self.assertIn("points outside", str(cm.exception))
            self.assertEqual(sorted(os.listdir(d)), ["dl", "victim"])
            self.assertEqual(sorted(os.listdir(os.path.join(dl, "h"))), ["in", "sub", "x"])
            with open(os.path.join(dl, "h", "in")) as f:
                self.assertEqual(f.read(), "ok\n")
            with self.assertRaises(gvx.GvxError) as cm:
                ep.read_file("/big", max_bytes=1 << 20)
            self.assertIn("max_bytes", str(cm.exception))
            self.assertEqual(len(ep.read_file("/big")), 2000000)
            r = ep.exec("head -c 3000000 /dev/zero; echo done >&2", max_output=1 << 20)
            self.assertEqual((r.exit_code, len(r.stdout), r.stderr, r.truncated), (0, 1 << 20, b"done\n", True))

    def test_cap_returns_429(self):
        fx = Fixture.get()
        srv = Server("cap", "--max-episodes", "1", "--retry-after", "2s")
        try:
            with srv.client.create(fx.image):
                with self.assertRaises(gvx.CapacityError) as cm:
                    srv.client.create(fx.image)
                self.assertEqual(cm.exception.status, 429)
                self.assertEqual(cm.exception.retry_after, 2.0)
            with srv.client.create(fx.image) as ep:  # room again
                self.assertEqual(ep.exec("echo ok").stdout, b"ok\n")
            self.assertIn("gvx_serve_create_rejected_total 1", srv.client.metrics())
        finally:
            srv.stop()

    def test_killed_client_is_reaped(self):
        """A client SIGKILLed with an episode open stops renewing its lease; the server reaps it."""
        fx = Fixture.get()
        script = (
            "import sys, time; sys.path.insert(0, %r); import gvx\n"
            "ep = gvx.Client(%r).create(%r, golden=%r, lease=2)\n"
            "print(ep.id, flush=True); time.sleep(600)\n"
        ) % (os.path.join(HERE, ".."), SERVER.socket, fx.image, fx.golden)
        p = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
        try:
            eid = p.stdout.readline().strip()
            self.assertTrue(eid, "the client did not create its episode")
            time.sleep(3)  # past the lease: the client's keepalive holds it
            self.assertIn(eid, [e["id"] for e in SERVER.client.list()])
            p.send_signal(signal.SIGKILL)
            p.wait()
            deadline = time.monotonic() + 20
            while eid in [e["id"] for e in SERVER.client.list()]:
                self.assertLess(time.monotonic(), deadline, "the dead client's episode was not reaped")
                time.sleep(0.2)
            self.assertFalse(os.path.exists(os.path.join(SERVER.dir, "st", "ep", eid)))
            self.assertIn('gvx_serve_teardowns_total{reason="lease"}', SERVER.client.metrics())
        finally:
            p.kill()
            p.wait()
            p.stdout.close()


class TestAdapters(unittest.TestCase):
    def test_swerex_session(self):
        fx = Fixture.get()

        async def main():
            async with gvx.AsyncClient(SERVER.socket) as c:
                rt = await gvx.SweRexRuntime.start(c, image=fx.image)
                try:
                    self.assertTrue(await rt.is_alive())
                    await rt.create_session(swerex.CreateSessionRequest(session="main"))
                    obs = await rt.run_in_session(swerex.Action(command="cd /tmp && export GREETING=hello", session="main"))
                    self.assertEqual(obs.exit_code, 0)
                    obs = await rt.run_in_session(swerex.Action(command="pwd; echo $GREETING", session="main"))
                    self.assertEqual(obs.output, "/tmp\nhello\n")
                    obs = await rt.run_in_session(swerex.Action(command="echo out; echo err >&2; false", session="main", check="silent"))
                    self.assertEqual((obs.output, obs.exit_code), ("out\nerr\n", 1))
                    with self.assertRaises(gvx.GvxError):
                        await rt.run_in_session(swerex.Action(command="exit 3", session="main"))
                    r = await rt.execute(swerex.Command(command=["echo", "x"]))
                    self.assertEqual((r.stdout, r.exit_code), ("x\n", 0))
                    r = await rt.execute(swerex.Command(command="echo $0 >&2", shell=True))
                    self.assertEqual(r.stderr, "/bin/sh\n")
                    await rt.write_file(swerex.WriteFileRequest(content="héllo\n", path="/tmp/w/f.txt"))
                    self.assertEqual((await rt.read_file(swerex.ReadFileRequest(path="/tmp/w/f.txt"))).content, "héllo\n")
                    with tempfile.TemporaryDirectory() as d:
                        with open(os.path.join(d, "local.txt"), "w") as f:
                            f.write("up\n")
                        await rt.upload(swerex.UploadRequest(source_path=os.path.join(d, "local.txt"), target_path="/srv/renamed.txt"))
                    obs = await rt.run_in_session(swerex.Action(command="cat /srv/renamed.txt", session="main"))
                    self.assertEqual(obs.output, "up\n")
                    await rt.close_session(swerex.CloseSessionRequest(session="main"))
                    with self.assertRaises(gvx.GvxError):
                        await rt.run_in_session(swerex.Action(command="true", session="main"))
                finally:
                    await rt.close()

        asyncio.run(main())

    def test_gym_env(self):
        fx = Fixture.get()

        def reward(ep, action, r):
            return (1.0, True) if r.stdout.strip() == b"42" else (0.0, False)

        env = gvx.GymEnv(SERVER.client, reward_fn=reward, max_steps=3, setup="echo ready",
                         image=fx.image, golden=fx.golden)
        try:
            obs, info = env.reset()
            self.assertEqual(obs, "ready\n")
            first = info["episode_id"]
            obs, rew, term, trunc, _ = env.step("echo 41 > /var/lib/docker/n; cat /var/lib/docker/n")
            self.assertEqual((obs, rew, term, trunc), ("41\n", 0.0, False, False))
            obs, rew, term, trunc, _ = env.step("echo 42")
            self.assertEqual((rew, term, trunc), (1.0, True, False))
            obs, info = env.reset()  # a fresh clone: the old file is gone
            self.assertNotEqual(info["episode_id"], first)
            self.assertIn("No such file", env.step("cat /var/lib/docker/n")[0])
            env.step("true")
            self.assertTrue(env.step("true")[3], "max_steps truncates")
        finally:
            env.close()
        self.assertEqual(SERVER.client.list(), [])


class TestDockerInEpisode(unittest.TestCase):
    def test_docker_run_preloaded_image(self):
        """docker run, inside an episode, of an image preloaded in the golden volume."""
        fx = Fixture.get()
        image, golden = dind_fixture(fx)
        t0 = time.monotonic()
        with SERVER.client.create(image, golden=golden, docker=True, service=["dockerd-entrypoint.sh"],
                                  env={"DOCKER_TLS_CERTDIR": ""}) as ep:
            self.assertTrue(ep.docker_socket and os.path.exists(ep.docker_socket))
            # The create waited for the daemon: no `until docker info` loop.
            up = time.monotonic()
            self.assertEqual(ep.service()["state"], "ready")
            r = ep.exec("docker -H tcp://127.0.0.1:2375 version")
            self.assertEqual(r.exit_code, 0, "the create returned before dockerd answered: " + r.output)
            r = ep.exec("docker -H tcp://127.0.0.1:2375 run --rm hello:latest echo hi-from-docker")
            self.assertEqual((r.exit_code, r.stdout), (0, b"hi-from-docker\n"), r.output)
            print(f"\ndockerd up {up - t0:.1f}s after create; docker run {r.seconds:.2f}s", file=sys.stderr)


def dind_fixture(fx):
    """The docker:dind-shaped test image and a golden volume with
    hello:latest preloaded: given by $GVX_TEST_DIND_IMAGE and
    $GVX_TEST_DIND_GOLDEN, or made here (as root) from package dindtest's
    cached image by mkdind and gvx-vol build-golden."""
    image, golden = os.environ.get("GVX_TEST_DIND_IMAGE"), os.environ.get("GVX_TEST_DIND_GOLDEN")
    if image and golden:
        return image, golden
    if os.getuid() != 0:
        raise unittest.SkipTest("the Docker-inside image is built as root (debootstrap): run as root, "
                                "or set GVX_TEST_DIND_IMAGE and GVX_TEST_DIND_GOLDEN")
    # build-golden binds the tars to load into the daemon: a bind of a
    # host file needs the namespaced mode's gofer.
    fx.need_namespaces("gvx-vol build-golden --load")
    cache = os.environ.get("GVX_TEST_CACHE", "/var/tmp/gvx-test-cache-%d" % os.geteuid())
    if not glob.glob(os.path.join(cache, "dind-*[!k]")) and not os.environ.get("GVX_TEST_DIND_BUILD"):
        raise unittest.SkipTest(f"no dind test image cached in {cache} (building it takes minutes: "
                                "run scripts/mkdind.sh once, or set GVX_TEST_DIND_BUILD=1)")
    d = os.path.join(fx.work, "dind")
    env = dict(os.environ, CGO_ENABLED="0", GVX_RUNGV=fx.rungv)
    try:
        subprocess.run(["go", "run", "./image/dindtest/mkdind", "-hello", d + "-hello.tar", d], cwd=REPO, env=env,
                       check=True, capture_output=True, timeout=1200)
        subprocess.run(["go", "run", "./cmd/gvx-vol", "build-golden", "--daemon-image", "oci:" + d,
                        "--load", d + "-hello.tar", "--size", "4G", d + "-golden.ext4"], cwd=REPO, env=env,
                       check=True, capture_output=True, timeout=600)
    except subprocess.CalledProcessError as e:
        raise AssertionError(f"{e.cmd}: {e.stdout.decode()}{e.stderr.decode()}")
    return "oci:" + d, d + "-golden.ext4"


if __name__ == "__main__":
    unittest.main()
