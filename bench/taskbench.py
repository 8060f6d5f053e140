#!/usr/bin/env python3
"""bench/task.sh's driver: N episodes of the task at once, one side.

  taskbench.py gvx  --socket S --image IMG --golden G --project DIR --n N --cgroup CG
  taskbench.py host --docker-host unix://S --cli-dir D --project DIR --n N --cgroup CG

Per episode, the phases (seconds, wall, each as the client sees it):
  create   gvx: POST /v1/episodes from the golden clone until dockerd answers
           `docker info` inside; host: nothing (the daemon is shared, its
           images loaded before)
  upload   the project into the episode (gvx: Episode.upload; host: a copy)
  up       docker compose up -d --build (builds the app image; redis must be
           healthy before app starts: depends_on service_healthy)
  healthy  docker compose up -d --wait: until every service is healthy
  idle     with TASK_IDLE=S: S seconds of the healthy project doing
           nothing but its healthchecks (a `sleep S`); the table at N=1
           shows its CPU per second
  test1    docker compose run --rm app python3 -m pytest (30 tests)
  rebuild  edit app/kv.py, docker compose up -d --build --wait
  test2    the tests again, which now expect the edit
  logs     docker compose logs
  close    gvx: Episode.close; host: docker compose down -v --rmi local
  whole    create → close
CPU: the cgroup CG's cpuacct.usage before and after the round (every
process the side runs: rungv serve and its episodes; dockerd, containerd,
shims, containers and the docker CLI), and before and after each phase
(cpu_phases: the side's whole CPU during the phase, so a phase's own only
at N=1; the table shows them at N=1). With RUNGV_PROFILE_DIR set (serve's,
bench/task.sh's SENTRY_PROFILE) and N=1, also rpc_phases: the volume
server's lisafs requests per phase (total, the busiest types, FSyncs,
bytes) from the counters the server keeps in DIR/<id>.volume-N.json
(rewritten every 250 ms while they change: each phase boundary waits
0.3 s before reading, outside the phase's timing). Prints one JSON object.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

PYTEST = "python3 -m pytest -q -p no:cacheprovider tests"
EDIT = "sed -i 's/^VERSION = \"v1\"$/VERSION = \"v2\"/' app/kv.py && grep -q '^VERSION = \"v2\"$' app/kv.py"
NTESTS = 30
TIMEOUT = float(os.environ.get("TASK_PHASE_TIMEOUT", "900"))
# Seconds of an idle, healthy project between healthy and test1 (0: no
# idle phase): its CPU is what the two healthchecks and the idle daemons
# cost per second, which every episode pays for as long as it lives.
IDLE = int(os.environ.get("TASK_IDLE", "0"))


def phases(p):
    """The shell line of each step for compose project p, run in the project directory."""
    dc = f"docker compose -p {p}"
    idle = [("idle", f"sleep {IDLE}")] if IDLE > 0 else []
    return [
        ("up", f"{dc} up -d --build --quiet-pull 2>&1"),
        ("healthy", f"{dc} up -d --wait 2>&1"),
    ] + idle + [
        ("test1", f"{dc} run --rm -T app {PYTEST} 2>&1"),
        ("rebuild", f"{EDIT} && {dc} up -d --build --wait 2>&1"),
        ("test2", f"{dc} run --rm -T -e EXPECT_VERSION=v2 app {PYTEST} 2>&1"),
        ("logs", f"{dc} logs --no-color 2>&1 | tail -n 5"),
    ]


def check(name, code, out):
    if code != 0:
        raise RuntimeError(f"{name}: exit {code}: {out[-3000:]}")
    if name.startswith("test") and f"{NTESTS} passed" not in out:
        raise RuntimeError(f"{name}: want '{NTESTS} passed': {out[-3000:]}")


def cpu_ns(cg):
    with open(os.path.join(cg, "cpuacct.usage")) as f:
        return int(f.read())


def volume_stats(prof, before):
    """The counters of the volumes that appeared in prof since before (a set of names), summed."""
    tot = {}
    for name in sorted(set(os.listdir(prof)) - before):
        if ".volume-" not in name or not name.endswith(".json"):
            continue
        for _ in range(20):  # a reader can catch a rewrite half done
            try:
                with open(os.path.join(prof, name)) as f:
                    st = json.load(f)
                break
            except (ValueError, OSError):
                time.sleep(0.05)
        else:
            continue
        for k, v in st.get("requests", {}).items():
            tot[k] = tot.get(k, 0) + v
        for k in ("total", "bytes_read", "bytes_written", "syncs", "syncs_clean", "sync_ns"):
            tot["_" + k] = tot.get("_" + k, 0) + st.get(k, 0)
    return tot


def stats_diff(a, b):
    d = {k: b.get(k, 0) - a.get(k, 0) for k in b}
    out = {k[1:]: v for k, v in d.items() if k.startswith("_")}
    out["top"] = dict(sorted(((k, v) for k, v in d.items() if not k.startswith("_") and v), key=lambda kv: -kv[1])[:6])
    return out


def run_gvx(a, i, rec):
    import gvx
    prof = os.environ.get("RUNGV_PROFILE_DIR") if a.n == 1 else None
    before = set(os.listdir(prof)) if prof else None
    c = gvx.Client(socket_path=a.socket)
    t0 = time.monotonic()
    ep = c.create(a.image, golden=a.golden, golden_durability=a.golden_durability, docker=True, service=["dockerd-entrypoint.sh"] + a.daemon_arg,
                  env={"DOCKER_TLS_CERTDIR": ""}, ttl=7200, wait_for_capacity=600)
    try:
        r = ep.exec("i=0; until docker info >/dev/null 2>&1; do i=$((i+1)); [ $i -lt 2400 ] || exit 1; sleep 0.05; done",
                    timeout=TIMEOUT)
        check("create", r.exit_code, r.output)
        rec["create"] = time.monotonic() - t0
        t = time.monotonic()
        ep.upload(a.project, "/work")
        rec["upload"] = time.monotonic() - t
        wd = "/work/" + os.path.basename(a.project.rstrip("/"))
        vs = None
        for name, line in phases(f"ep{i}"):
            if prof:
                time.sleep(0.3)  # the server rewrites its counters every 250 ms
                vs = volume_stats(prof, before)
            t, c0 = time.monotonic(), cpu_ns(a.cgroup)
            r = ep.exec(line, workdir=wd, timeout=TIMEOUT)
            rec[name] = time.monotonic() - t
            rec.setdefault("cpu_phases", {})[name] = (cpu_ns(a.cgroup) - c0) / 1e9
            if prof:
                time.sleep(0.3)
                rec.setdefault("rpc_phases", {})[name] = stats_diff(vs, volume_stats(prof, before))
            check(name, r.exit_code, r.output)
    finally:
        t = time.monotonic()
        ep.close()
        rec["close"] = time.monotonic() - t
        c.close()
    rec["whole"] = time.monotonic() - t0


def run_host(a, i, rec):
    env = dict(os.environ, DOCKER_HOST=a.docker_host, DOCKER_CONFIG=os.path.join(a.cli_dir, "config"),
               PATH=a.cli_dir + ":" + os.environ["PATH"])
    # Every command joins the side's cgroup first: its CPU is the side's.
    join = f'echo $$ > {a.cgroup}/cgroup.procs && exec sh -c "$0"'

    def sh(line, cwd):
        p = subprocess.run(["sh", "-c", join, line], cwd=cwd, env=env, capture_output=True, timeout=TIMEOUT)
        return p.returncode, (p.stdout + p.stderr).decode(errors="replace")

    t0 = time.monotonic()
    rec["create"] = 0.0
    d = tempfile.mkdtemp(prefix=f"ep{i}-", dir=a.scratch)
    p = f"ep{i}"
    try:
        t = time.monotonic()
        wd = os.path.join(d, os.path.basename(a.project.rstrip("/")))
        shutil.copytree(a.project, wd)
        rec["upload"] = time.monotonic() - t
        for name, line in phases(p):
            t, c0 = time.monotonic(), cpu_ns(a.cgroup)
            code, out = sh(line, wd)
            rec[name] = time.monotonic() - t
            rec.setdefault("cpu_phases", {})[name] = (cpu_ns(a.cgroup) - c0) / 1e9
            check(name, code, out)
    finally:
        t = time.monotonic()
        code, out = sh(f"docker compose -p {p} down -v --rmi local 2>&1", d)
        shutil.rmtree(d, ignore_errors=True)
        rec["close"] = time.monotonic() - t
        if code != 0:
            rec.setdefault("error", f"close: exit {code}: {out[-2000:]}")
    rec["whole"] = time.monotonic() - t0


PHASES = ["create", "upload", "up", "healthy"] + (["idle"] if IDLE > 0 else []) + ["test1", "rebuild", "test2", "logs", "close", "whole"]


def p50(xs):
    xs = sorted(xs)
    if not xs:
        return None
    m = len(xs) // 2
    return xs[m] if len(xs) % 2 else (xs[m - 1] + xs[m]) / 2


def table(lines):
    """The side-by-side table of the rounds (JSON lines) on stdin."""
    rounds = [json.loads(l) for l in lines if l.strip()]
    by = {(r["side"], r["n"]): r for r in rounds}
    fmt = "%-3s %-22s %10s %10s %9s"
    print("\n== p50 over the episodes of a round, seconds (ratio gvx/host)")
    print(fmt % ("N", "phase", "gvx", "host", "gvx/host"))
    for n in sorted({r["n"] for r in rounds}):
        g, h = by.get(("gvx", n)), by.get(("host", n))

        def val(r, ph):
            if r is None:
                return None
            return p50([e[ph] for e in r["episodes"] if ph in e and "error" not in e])

        rows = [(ph, val(g, ph), val(h, ph)) for ph in PHASES]
        if n == 1:  # a phase's CPU is its own only when nothing else runs

            def cval(r, ph):
                return None if r is None else p50([e["cpu_phases"][ph] for e in r["episodes"]
                                                   if ph in e.get("cpu_phases", {}) and "error" not in e])

            rows += [("CPU s, " + ph, cval(g, ph), cval(h, ph)) for ph, _ in phases("")]
            if IDLE > 0:
                rows.append(("CPU s per idle second", *(None if x is None else x / IDLE for x in (cval(g, "idle"), cval(h, "idle")))))

            def rval(ph, key):
                return None if g is None else p50([e["rpc_phases"][ph][key] for e in g["episodes"]
                                                   if ph in e.get("rpc_phases", {}) and "error" not in e])

            if g and any("rpc_phases" in e for e in g["episodes"]):
                rows += [("volume RPCs, " + ph, rval(ph, "total"), None) for ph, _ in phases("")]
                rows += [("volume fsyncs, " + ph, rval(ph, "syncs"), None) for ph, _ in phases("")]
        rows.append(("CPU s per episode", g and g["cpu_per_episode_s"], h and h["cpu_per_episode_s"]))
        rows.append(("round wall", g and g["wall_s"], h and h["wall_s"]))
        for ph, a, b in rows:
            ratio = "%.1fx" % (a / b) if a is not None and b else "-"
            print(fmt % (n, ph, "-" if a is None else "%.2f" % a, "-" if b is None else "%.2f" % b, ratio))
        print(fmt % (n, "failed episodes", g["failed"] if g else "-", h["failed"] if h else "-", ""))


def main():
    if sys.argv[1:] == ["table"]:
        table(sys.stdin)
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("side", choices=["gvx", "host"])
    ap.add_argument("--n", type=int, default=1)
    ap.add_argument("--project", required=True)
    ap.add_argument("--cgroup", required=True, help="cpuacct cgroup directory holding the side's processes")
    ap.add_argument("--socket")
    ap.add_argument("--image")
    ap.add_argument("--golden")
    ap.add_argument("--golden-durability", choices=["full", "episode"], default=None,
                    help="the golden clone's durability (serve's golden_durability; default episode)")
    ap.add_argument("--daemon-arg", action="append", default=[],
                    help="an argument for the episode's dockerd (gvx; repeat for more)")
    ap.add_argument("--docker-host")
    ap.add_argument("--cli-dir")
    ap.add_argument("--scratch", default=tempfile.gettempdir())
    a = ap.parse_args()
    fn = run_gvx if a.side == "gvx" else run_host
    recs = [{} for _ in range(a.n)]

    def one(i):
        try:
            fn(a, i, recs[i])
        except Exception as e:  # recorded: a failed episode is a result too
            recs[i]["error"] = f"{type(e).__name__}: {e}"[:4000]

    c0, t0 = cpu_ns(a.cgroup), time.monotonic()
    ts = [threading.Thread(target=one, args=(i,)) for i in range(a.n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    wall, cpu = time.monotonic() - t0, (cpu_ns(a.cgroup) - c0) / 1e9
    json.dump({"side": a.side, "n": a.n, "wall_s": wall, "cpu_s": cpu, "cpu_per_episode_s": cpu / a.n,
               "episodes": recs, "failed": sum(1 for r in recs if "error" in r)}, sys.stdout)
    print()


if __name__ == "__main__":
    main()
