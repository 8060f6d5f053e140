"""The episode's service as a client sees it (state, log, a create that
waits for Docker), the errors a client can act on, and the adapters
running a whole task (upload, build, test, edit, retest), against a real
rungv serve."""

import asyncio
import os
import tempfile
import threading
import time
import unittest

from .helpers import Fixture, Server

import gvx
from gvx import swerex


def setUpModule():
    global SERVER
    Fixture.get()
    # A short ready timeout: the daemon that never starts is given up on soon.
    SERVER = Server("svc", "--max-episodes", "8", "--ready-timeout", "8s")


def tearDownModule():
    SERVER.stop()


class TestService(unittest.TestCase):
    def test_daemon_never_starts(self):
        """create(docker=True) with a daemon that never answers raises, within
        the ready timeout, with the service's log tail; while it boots, its
        state (starting) and its log are visible to another client."""
        fx = Fixture.get()
        svc = ["sh", "-c", "echo daemon-booting-py; exec sleep 1000"]
        seen = {}
        stop = threading.Event()

        def watch():
            while not stop.is_set():
                for info in SERVER.client.list():
                    ep = SERVER.client.episode(info["id"])
                    try:
                        d = ep.describe()
                        log = ep.service_log()
                    except gvx.GvxError:
                        continue
                    if (d.get("service") or {}).get("state") == "starting" and b"daemon-booting-py" in log:
                        seen.update(state=d["state"], service=d["service"], log=log)
                        return
                time.sleep(0.05)

        w = threading.Thread(target=watch, daemon=True)
        w.start()
        t0 = time.monotonic()
        try:
            with self.assertRaises(gvx.GvxError) as cm:
                SERVER.client.create(fx.image, docker=True, service=svc, privileged=False)
        finally:
            stop.set()
            w.join()
        took = time.monotonic() - t0
        msg = cm.exception.message
        self.assertEqual(cm.exception.status, 500, msg)
        self.assertIn("did not answer GET /info within the ready timeout (8s", msg)
        self.assertIn("its log ends", msg)
        self.assertIn("daemon-booting-py", msg)
        self.assertLess(took, 60, "the create outlived its ready timeout by far")
        self.assertEqual(seen.get("state"), "starting", seen)
        self.assertEqual(seen["service"]["argv"], svc)
        self.assertEqual(SERVER.client.list(), [])

    def test_daemon_exits(self):
        """A daemon that exits fails the create at once with its status; with
        wait="agent" the episode comes up and says its service exited."""
        fx = Fixture.get()
        svc = ["sh", "-c", "echo bad-flag-py >&2; exit 1"]
        with self.assertRaises(gvx.GvxError) as cm:
            SERVER.client.create(fx.image, docker=True, service=svc, privileged=False)
        self.assertIn("exited with status 1", cm.exception.message)
        self.assertIn("bad-flag-py", cm.exception.message)
        with SERVER.client.create(fx.image, docker=True, service=svc, privileged=False, wait="agent") as ep:
            deadline = time.monotonic() + 30
            while (ep.service() or {}).get("state") != "exited":
                self.assertLess(time.monotonic(), deadline, ep.service())
                time.sleep(0.05)
            self.assertEqual(ep.service()["exit_code"], 1)
            self.assertIn(b"bad-flag-py", ep.service_log())

    def test_log_stream(self):
        """service_log_stream follows the service's output; the async one
        too, on the event loop."""
        fx = Fixture.get()
        svc = ["sh", "-c", "i=0; while :; do echo tick-$i; i=$((i+1)); sleep 0.1; done"]
        with SERVER.client.create(fx.image, service=svc) as ep:
            self.assertEqual(ep.service()["state"], "running")
            buf = b""
            it = ep.service_log_stream()
            for chunk in it:
                buf += chunk
                if b"tick-12\n" in buf:
                    break
            it.close()
            self.assertIn(b"tick-3\n", buf)

        async def main():
            async with gvx.AsyncClient(SERVER.socket) as c:
                async with await c.create(fx.image, service=svc) as ep:
                    loop_thread = threading.get_ident()
                    buf = b""
                    async for chunk in ep.service_log_stream():
                        self.assertEqual(threading.get_ident(), loop_thread)
                        buf += chunk
                        if b"tick-5\n" in buf:
                            break
                    return buf

        self.assertIn(b"tick-5\n", asyncio.run(main()))


class TestErrors(unittest.TestCase):
    def test_actionable_errors(self):
        fx = Fixture.get()
        with self.assertRaises(gvx.NotFoundError) as cm:
            SERVER.client.create("oci:/no/such/layout")
        self.assertIn('image "oci:/no/such/layout" not found', cm.exception.message)
        self.assertIn("gvx-vol image ls", cm.exception.message)
        with SERVER.client.create(fx.image) as ep:
            with self.assertRaises(gvx.GvxError) as cm:
                ep.exec("true", workdir="/nope")
            self.assertEqual(cm.exception.status, 400)
            self.assertIn("workdir /nope: no such directory", cm.exception.message)
            with self.assertRaises(gvx.ConflictError) as cm:
                ep.fork(2)
            self.assertIn(f"episode {ep.id} is not forkable: create it with", cm.exception.message)
            ep.write_file("/tmp/x.sh", "echo\n", mode=0o750)
            got = ep.read_file("/tmp/x.sh")
            self.assertEqual((got, got.mode), (b"echo\n", 0o750))
            ep.exec("chmod 4755 /tmp/x.sh").check()
            self.assertEqual(ep.read_file("/tmp/x.sh").mode, 0o4755)


def make_task(d):
    """A small project: build.sh makes build/calc from src/calc.sh (which
    has a bug), test.sh checks it."""
    os.makedirs(os.path.join(d, "proj", "src"))
    files = {
        "src/calc.sh": 'add() { echo $(( $1 - $2 )); }\n',
        "build.sh": 'set -e\nmkdir -p build\n{ echo "#!/bin/sh"; cat src/calc.sh; echo \'add "$@"\'; } > build/calc\nchmod 755 build/calc\necho built\n',
        "test.sh": 'got=$(build/calc 2 3)\nif [ "$got" = 5 ]; then echo PASS; else echo "FAIL: 2+3 gave $got"; exit 1; fi\n',
    }
    for name, text in files.items():
        with open(os.path.join(d, "proj", name), "w") as f:
            f.write(text)
    return os.path.join(d, "proj")


class TestAdaptersTask(unittest.TestCase):
    def test_gym_task(self):
        """GymEnv: upload, build, test (fails), edit, rebuild and retest
        (passes, reward 1), download the build; steps run under the shell
        found (bash where the image has it, else sh)."""
        fx = Fixture.get()

        def reward(ep, action, r):
            return (1.0, True) if b"PASS" in r.stdout else (0.0, False)

        env = gvx.GymEnv(SERVER.client, reward_fn=reward, max_steps=10, image=fx.image)
        try:
            with tempfile.TemporaryDirectory() as d:
                env.reset()
                self.assertIn(env.shell, ("/bin/bash", "/usr/bin/bash", "/bin/sh", "/usr/bin/sh"))
                self.assertEqual(env.step('echo "$0"')[0], env.shell + "\n")
                env.upload(make_task(d), "/work")
                env.step_workdir = "/work/proj"
                obs, rew, term, _, _ = env.step("sh build.sh")
                self.assertEqual((obs, rew, term), ("built\n", 0.0, False))
                obs, rew, term, _, info = env.step("sh test.sh")
                self.assertEqual((obs, rew, term, info["result"].exit_code), ("FAIL: 2+3 gave -1\n", 0.0, False, 1))
                src = env.read_file("/work/proj/src/calc.sh")
                env.write_file("/work/proj/src/calc.sh", src.replace(b"-", b"+"))
                obs, rew, term, trunc, _ = env.step("sh build.sh && sh test.sh")
                self.assertEqual((obs, rew, term, trunc), ("built\nPASS\n", 1.0, True, False))
                self.assertEqual(env.read_file("/work/proj/build/calc").mode, 0o755)
                out = env.download("/work/proj/build", os.path.join(d, "back"))
                with open(os.path.join(out, "calc")) as f:
                    self.assertIn("$1 + $2", f.read())
            with self.assertRaises(gvx.GvxError):
                gvx.GymEnv(SERVER.client, image=fx.image, shell="no-such-shell").reset()
        finally:
            env.close()

    def test_swerex_task(self):
        """SweRexRuntime: the same task; a timeout raises CommandTimeoutError
        as SWE-ReX does (execute and run_in_session), a failing test under
        check raises NonZeroExitCodeError."""
        fx = Fixture.get()

        async def main():
            async with gvx.AsyncClient(SERVER.socket) as c:
                rt = await gvx.SweRexRuntime.start(c, image=fx.image)
                try:
                    with tempfile.TemporaryDirectory() as d:
                        await rt.upload(swerex.UploadRequest(source_path=make_task(d), target_path="/work/proj"))
                    r = await rt.execute(swerex.Command(command=["sh", "build.sh"], cwd="/work/proj", check=True))
                    self.assertEqual((r.stdout, r.exit_code), ("built\n", 0))
                    await rt.create_session(swerex.CreateSessionRequest(session="s"))
                    await rt.run_in_session(swerex.Action(command="cd /work/proj", session="s"))
                    with self.assertRaises(swerex.NonZeroExitCodeError):
                        await rt.run_in_session(swerex.Action(command="sh test.sh", session="s"))
                    obs = await rt.run_in_session(swerex.Action(command="sh test.sh", session="s", check="silent"))
                    self.assertEqual((obs.output, obs.exit_code), ("FAIL: 2+3 gave -1\n", 1))
                    src = (await rt.read_file(swerex.ReadFileRequest(path="/work/proj/src/calc.sh"))).content
                    await rt.write_file(swerex.WriteFileRequest(path="/work/proj/src/calc.sh", content=src.replace("-", "+")))
                    obs = await rt.run_in_session(swerex.Action(command="sh build.sh && sh test.sh", session="s"))
                    self.assertEqual((obs.output, obs.exit_code), ("built\nPASS\n", 0))
                    with self.assertRaises(swerex.CommandTimeoutError) as cm:
                        await rt.execute(swerex.Command(command=["sh", "-c", "echo started; sleep 30"], timeout=0.5))
                    self.assertIsInstance(cm.exception, TimeoutError)
                    self.assertEqual(cm.exception.result.stdout, b"started\n")
                    with self.assertRaises(swerex.CommandTimeoutError):
                        await rt.run_in_session(swerex.Action(command="sleep 30", session="s", timeout=0.5, check="ignore"))
                    r = await rt.execute(swerex.Command(command="echo o; echo e >&2", shell=True, merge_output_streams=True))
                    self.assertEqual((r.stdout, r.stderr), ("o\ne\n", ""))
                    with self.assertRaises(swerex.SessionExistsError):
                        await rt.create_session(swerex.CreateSessionRequest(session="s"))
                finally:
                    await rt.close()

        asyncio.run(main())


class TestAsync(unittest.TestCase):
    def test_async_stream_and_callbacks(self):
        """AsyncEpisode.exec_stream yields events on the event loop;
        exec's on_output runs on the loop (a coroutine is awaited); leaving
        a stream early ends it."""
        fx = Fixture.get()

        async def main():
            loop_thread = threading.get_ident()
            async with gvx.AsyncClient(SERVER.socket) as c:
                async with await c.create(fx.image) as ep:
                    types = []
                    async for ev in ep.exec_stream("echo a; echo b >&2; exit 2"):
                        self.assertEqual(threading.get_ident(), loop_thread)
                        types.append(ev["type"])
                    self.assertEqual(sorted(types), ["exit", "stderr", "stdout"])
                    threads, chunks = set(), []

                    async def on_output(stream, data):
                        threads.add(threading.get_ident())
                        chunks.append(data)
                        await asyncio.sleep(0)

                    r = await ep.exec("for i in 1 2 3; do echo $i; done", on_output=on_output)
                    self.assertEqual((r.exit_code, b"".join(chunks)), (0, b"1\n2\n3\n"))
                    self.assertEqual(threads, {loop_thread})
                    t0 = time.monotonic()
                    async for ev in ep.exec_stream("echo first; sleep 60"):
                        break
                    self.assertLess(time.monotonic() - t0, 30)
                    self.assertEqual((await ep.exec("echo after")).stdout, b"after\n")

        asyncio.run(main())
