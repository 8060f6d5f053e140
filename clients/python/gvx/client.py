"""The synchronous client: Client creates episodes, Episode drives one."""

import base64
import io
import os
import tarfile
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from ._http import DEFAULT_MAX_JSON, Transport
from ._untar import DEFAULT_MAX_DOWNLOAD, DEFAULT_MAX_MEMBERS, CappedReader, unpack
from .errors import CapacityError, ExecError, GvxError, NotFoundError

Cmd = Union[str, Sequence[str]]


@dataclass
class ExecResult:
    """What a command did: its exit code (128+N when killed by signal N),
    its output, whether the timeout killed it, and how long it ran.
    truncated: a stream went past the exec's max_output, and what came after
    was dropped."""

    exit_code: int
    stdout: bytes = b""
    stderr: bytes = b""
    timed_out: bool = False
    seconds: float = 0.0
    truncated: bool = False

    @property
    def output(self) -> str:
        """stdout and stderr as text (stderr after stdout)."""
        return (self.stdout + self.stderr).decode(errors="replace")

    def check(self) -> "ExecResult":
        """Raises ExecError unless the command exited 0."""
        if self.exit_code != 0:
            raise ExecError(0, f"command exited {self.exit_code}: {self.stderr.decode(errors='replace')[-2000:]}")
        return self


def exec_request(cmd: Cmd, env: Optional[Dict[str, str]] = None, workdir: Optional[str] = None,
                 timeout: Optional[float] = None, stdin: Union[None, bytes, str] = None) -> Dict[str, Any]:
    """The JSON of an exec: a str is run by /bin/sh -c, a sequence as argv."""
    req: Dict[str, Any] = {}
    if isinstance(cmd, str):
        req["shell"] = cmd
    else:
        req["argv"] = list(cmd)
        if not req["argv"]:
            raise ValueError("gvx: empty argv")
    if env:
        req["env"] = [f"{k}={v}" for k, v in env.items()]
    if workdir:
        req["workdir"] = workdir
    if timeout:
        req["timeout"] = float(timeout)
    if stdin:
        req["stdin"] = base64.b64encode(stdin.encode() if isinstance(stdin, str) else stdin).decode()
    return req


# What an exec keeps of each of stdout and stderr by default: the guest
# decides how much it prints, and a command that never stops would
# otherwise fill the caller's memory.
DEFAULT_MAX_OUTPUT = 64 << 20

# What read_file and download_tar read into memory at most by default.
DEFAULT_MAX_READ = 1 << 30

# The most of a service log (not followed) read: the server keeps 64 KiB.
DEFAULT_MAX_SERVICE_LOG = 16 << 20

# The most of /metrics read.
MAX_METRICS = 64 << 20


class Fold:
    """Folds an exec's events, one at a time, into an ExecResult, keeping
    at most max_output bytes of each stream (None: all)."""

    def __init__(self, max_output: Optional[int] = DEFAULT_MAX_OUTPUT):
        self.max_output = max_output
        self.out, self.err = bytearray(), bytearray()
        self.truncated = False
        self.result: Optional[ExecResult] = None

    def add(self, ev: dict) -> Optional[Tuple[str, bytes]]:
        """Takes one event; returns (stream, bytes) for output, else None
        (self.result is set by the exit; an error event raises ExecError)."""
        t = ev.get("type")
        if t in ("stdout", "stderr"):
            data = base64.b64decode(ev.get("data", ""))
            buf = self.out if t == "stdout" else self.err
            if self.max_output is not None and len(buf) + len(data) > self.max_output:
                buf.extend(data[:max(0, self.max_output - len(buf))])
                self.truncated = True
            else:
                buf.extend(data)
            return t, data
        if t == "exit":
            self.result = ExecResult(int(ev.get("exit_code", -1)), bytes(self.out), bytes(self.err),
                                     bool(ev.get("timed_out", False)), float(ev.get("seconds", 0.0)),
                                     self.truncated)
        elif t == "error":
            raise ExecError(0, ev.get("error", "exec failed"))
        return None

    def end(self) -> ExecResult:
        """The result; ExecError if the stream ended before the exit."""
        if self.result is None:
            raise ExecError(0, "the exec stream ended before the command's exit (the episode went away?)")
        return self.result


def collect(events: Iterator[dict], on_output: Optional[Callable[[str, bytes], None]] = None,
            max_output: Optional[int] = DEFAULT_MAX_OUTPUT) -> ExecResult:
    """Folds an exec's event stream into an ExecResult, keeping at most
    max_output bytes of each stream (None: all; on_output still sees all)."""
    f = Fold(max_output)
    for ev in events:
        out = f.add(ev)
        if out is not None and on_output:
            on_output(*out)
        if f.result is not None:
            break
    return f.end()


class FileBytes(bytes):
    """A guest file's bytes (read_file), with its permission bits as chmod
    takes them (0o644, 0o4755) in ``mode``; None when the server did not
    say."""

    mode: Optional[int] = None

    def __new__(cls, data: bytes, mode: Optional[int] = None) -> "FileBytes":
        b = super().__new__(cls, data)
        b.mode = mode
        return b


def parse_mode(v: Optional[str]) -> Optional[int]:
    """X-Gvx-Mode's value as an int, or None (absent or not octal)."""
    if not v or len(v) > 5 or any(c not in "01234567" for c in v):
        return None
    return int(v, 8)


def tar_paths(local_path: str, arcname: Optional[str] = None) -> bytes:
    """A tar of a local file or directory, named arcname (its basename)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        tf.add(local_path, arcname=arcname or os.path.basename(os.path.normpath(local_path)))
    return buf.getvalue()


def untar(data: bytes, local_dir: str, skip_outside_links: bool = False,
          max_members: Optional[int] = DEFAULT_MAX_MEMBERS) -> None:
    """Unpacks a tar from the server into local_dir. The guest wrote it, so
    nothing is written through a symlink and nothing may lead out of
    local_dir (see gvx._untar); skip_outside_links leaves such links out
    without an error. Sparse files and other exotic members are refused,
    and so is an archive of more than max_members entries (1,000,000)."""
    unpack(io.BytesIO(data), local_dir, None, skip_outside_links, max_members)


class Episode:
    """One live episode on the server. Use it as a context manager, or call
    close(). While open it renews its lease in a background thread (so a
    client that dies stops renewing, and the server reaps the episode).

    Example::

        with gvx.Client() as c, c.create("oci:/srv/images/busybox") as ep:
            r = ep.exec("echo hi")
            assert r.exit_code == 0 and r.stdout == b"hi\\n"
            ep.write_file("/tmp/x", b"data")
            assert ep.read_file("/tmp/x") == b"data"
    """

    def __init__(self, transport: Transport, info: Dict[str, Any], keepalive: bool = True):
        self._t = transport
        self.info = info
        self.id: str = info["id"]
        self.docker_socket: Optional[str] = info.get("docker_socket") or None
        # True when the server handed over an episode booted ahead of
        # demand (rungv serve --warm); info["claim_seconds"] is then the
        # create's latency.
        self.warm: bool = bool(info.get("warm"))
        self._closed = False
        self._stop = threading.Event()
        self._keeper: Optional[threading.Thread] = None
        lease = float(info.get("lease_seconds") or 0)
        if keepalive and lease > 0:
            self._keeper = threading.Thread(target=self._keepalive, args=(max(lease / 3, 0.2),),
                                            name=f"gvx-lease-{self.id}", daemon=True)
            self._keeper.start()

    def __repr__(self) -> str:
        return f"<gvx.Episode {self.id}{' closed' if self._closed else ''}>"

    def _path(self, verb: str = "") -> str:
        return f"/v1/episodes/{self.id}" + (f"/{verb}" if verb else "")

    def _keepalive(self, every: float) -> None:
        while not self._stop.wait(every):
            try:
                self._t.json("POST", self._path("renew"), timeout=30)
            except NotFoundError:
                return
            except GvxError:
                continue

    def renew(self) -> Dict[str, Any]:
        """Renews the lease by hand; returns the episode's description."""
        return self._t.json("POST", self._path("renew"))

    def describe(self) -> Dict[str, Any]:
        """The server's description of the episode (state, TTL, lease)."""
        return self._t.json("GET", self._path())

    def fork(self, n: int, *, ttl: Optional[float] = None, lease: Optional[float] = None,
             forkable: bool = False, keepalive: bool = True) -> List["Episode"]:
        """Makes n new episodes that continue from this one's current state
        (its files, processes and memory; each on its own clone of the
        volume) and returns them, running. The episode must have been
        created with forkable=True, and is forked at most once (fork a
        child, created with forkable=True here, for a later state). No
        exec may be running in it meanwhile."""
        req: Dict[str, Any] = {"n": n}
        for k, v in (("ttl", ttl), ("lease", lease)):
            if v is not None:
                req[k] = v
        if forkable:
            req["forkable"] = True
        out = self._t.json("POST", self._path("fork"), body=req)
        return [Episode(self._t, info, keepalive) for info in out["episodes"]]

    def exec_stream(self, cmd: Cmd, env: Optional[Dict[str, str]] = None, workdir: Optional[str] = None,
                    timeout: Optional[float] = None, stdin: Union[None, bytes, str] = None) -> Iterator[dict]:
        """Runs cmd and yields its events as they come: {"type": "stdout" or
        "stderr", "data": base64}, then {"type": "exit", "exit_code": N, …}."""
        return self._t.lines("POST", self._path("exec"), body=exec_request(cmd, env, workdir, timeout, stdin))

    def exec(self, cmd: Cmd, env: Optional[Dict[str, str]] = None, workdir: Optional[str] = None,
             timeout: Optional[float] = None, stdin: Union[None, bytes, str] = None,
             on_output: Optional[Callable[[str, bytes], None]] = None,
             max_output: Optional[int] = DEFAULT_MAX_OUTPUT) -> ExecResult:
        """Runs cmd (a str: /bin/sh -c; a list: argv) in the episode and
        waits for it. on_output(stream, bytes) sees the output as it comes.
        At most max_output bytes of each of stdout and stderr are kept (64
        MiB; None: all); past it the result says truncated."""
        return collect(self.exec_stream(cmd, env, workdir, timeout, stdin), on_output, max_output)

    def read_file(self, path: str, max_bytes: Optional[int] = DEFAULT_MAX_READ) -> FileBytes:
        """The bytes of the guest file path, as FileBytes: bytes whose
        ``mode`` is the file's permission bits (0o644; None if the server
        did not say). A file over max_bytes (1 GiB; None: no cap) is an
        error rather than a giant allocation."""
        resp, conn = self._t.request("GET", self._path("files"), query={"path": path})
        try:
            data = CappedReader(resp, max_bytes, f"the guest file {path}").read()
            return FileBytes(data, parse_mode(resp.getheader("X-Gvx-Mode")))
        finally:
            conn.close()

    def service(self) -> Optional[Dict[str, Any]]:
        """The state of the episode's service (create(service=...)), as the
        server sees it now: {"argv": [...], "state": "starting" | "running"
        | "ready" | "exited" | "failed", "exit_code": N, "error": "..."};
        None when the episode has no service."""
        return self.describe().get("service")

    def service_log(self, max_bytes: Optional[int] = DEFAULT_MAX_SERVICE_LOG) -> bytes:
        """The tail of the service's output the server keeps (its last 64
        KiB, with the agent's and rungv's own lines)."""
        resp, conn = self._t.request("GET", self._path("service/log"))
        try:
            return CappedReader(resp, max_bytes, "the service's log").read()
        finally:
            conn.close()

    def service_log_stream(self, chunk: int = 64 << 10) -> Iterator[bytes]:
        """Yields the tail of the service's output, then what it writes
        after, as it comes, until the episode ends (or the iterator is
        closed)."""
        resp, conn = self._t.request("GET", self._path("service/log"), query={"follow": "1"})
        try:
            while True:
                b = resp.read1(chunk) if hasattr(resp, "read1") else resp.read(1)
                if not b:
                    return
                yield b
        finally:
            conn.close()

    def write_file(self, path: str, data: Union[bytes, str], mode: int = 0o644) -> None:
        """Writes data to the guest file path (parents made). A new file
        gets exactly mode, setuid, setgid and sticky included (0o4755); an
        existing one is truncated and keeps its mode."""
        if isinstance(data, str):
            data = data.encode()
        self._t.json("PUT", self._path("files"), query={"path": path, "mode": "%o" % mode}, body=bytes(data),
                     headers={"Content-Type": "application/octet-stream"})

    def upload(self, local_path: str, remote_dir: str) -> Dict[str, Any]:
        """Copies a local file or directory into the guest directory
        remote_dir, keeping its name (remote_dir/basename)."""
        return self._t.json("PUT", self._path("archive"), query={"path": remote_dir}, body=tar_paths(local_path),
                            headers={"Content-Type": "application/x-tar"})

    def upload_tar(self, tar_bytes: bytes, remote_dir: str) -> Dict[str, Any]:
        """Unpacks a tar archive into the guest directory remote_dir."""
        return self._t.json("PUT", self._path("archive"), query={"path": remote_dir}, body=tar_bytes,
                            headers={"Content-Type": "application/x-tar"})

    def download_tar(self, remote_path: str, max_bytes: Optional[int] = DEFAULT_MAX_READ) -> bytes:
        """A tar of the guest path (entries named basename(remote_path)/…),
        at most max_bytes (1 GiB; None: no cap). The guest wrote it: unpack
        it with gvx.untar or download(), not tarfile's extractall."""
        resp, conn = self._t.request("GET", self._path("archive"), query={"path": remote_path})
        try:
            return CappedReader(resp, max_bytes, f"the archive of {remote_path}").read()
        finally:
            conn.close()

    def download(self, remote_path: str, local_dir: str, max_bytes: Optional[int] = DEFAULT_MAX_DOWNLOAD,
                 skip_outside_links: bool = False, max_members: Optional[int] = DEFAULT_MAX_MEMBERS) -> str:
        """Copies the guest file or directory into local_dir, streamed (at
        most max_bytes of archive, 8 GiB; None: no cap); returns the local
        path of the copy. The archive is the guest's: nothing is written
        through a symlink, and a symlink that leads out of local_dir is not
        kept: the download raises GvxError naming it once the rest is
        unpacked, or, with skip_outside_links, says nothing (gvx._untar).
        Sparse files and other exotic members are refused before they are
        expanded, and so is an archive of more than max_members entries
        (gvx.DEFAULT_MAX_MEMBERS, 1,000,000; None: no cap)."""
        resp, conn = self._t.request("GET", self._path("archive"), query={"path": remote_path})
        try:
            unpack(resp, local_dir, max_bytes, skip_outside_links, max_members)
        finally:
            conn.close()
        return os.path.join(local_dir, os.path.basename(remote_path.rstrip("/")) or ".")

    def close(self) -> None:
        """Tears the episode down (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        try:
            self._t.request("DELETE", self._path())[1].close()
        except NotFoundError:
            pass

    def __enter__(self) -> "Episode":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Client:
    """A client of one rungv serve: over its unix socket (socket_path,
    default $GVX_SERVE_SOCKET or rungv serve's default), or over TCP (url
    "http://127.0.0.1:7300" with token, default $GVX_SERVE_TOKEN).
    max_json: the largest JSON answer read (gvx.DEFAULT_MAX_JSON, 1 MiB;
    write_file's and upload's answers come from the episode's agent);
    a larger one raises GvxError, unread.

    Example::

        c = gvx.Client("/run/gvx/serve.sock")
        with c.create("oci:/srv/images/dind", golden="/srv/golden.ext4",
                      docker=True, service=["dockerd-entrypoint.sh"],
                      env={"DOCKER_TLS_CERTDIR": ""}) as ep:
            print(ep.exec(["docker", "-H", "tcp://127.0.0.1:2375", "images"]).output)
    """

    def __init__(self, socket_path: Optional[str] = None, url: Optional[str] = None,
                 token: Optional[str] = None, timeout: Optional[float] = None,
                 max_json: int = DEFAULT_MAX_JSON):
        self.transport = Transport(socket_path, url, token, timeout, max_json)

    def health(self) -> Dict[str, Any]:
        """{"ok": true, "live": N, "max": M}."""
        return self.transport.json("GET", "/v1/health")

    def metrics(self) -> str:
        """The server's Prometheus metrics, as text (at most MAX_METRICS bytes)."""
        resp, conn = self.transport.request("GET", "/metrics")
        try:
            return CappedReader(resp, MAX_METRICS, "the server's /metrics").read().decode(errors="replace")
        finally:
            conn.close()

    def list(self) -> List[Dict[str, Any]]:
        """Every live episode's description."""
        return self.transport.json("GET", "/v1/episodes")["episodes"]

    def episode(self, episode_id: str, keepalive: bool = False) -> Episode:
        """A handle on an existing episode (for instance one made by another
        process)."""
        return Episode(self.transport, self.transport.json("GET", f"/v1/episodes/{episode_id}"), keepalive)

    def create(self, image: Optional[str] = None, *, golden: Optional[str] = None,
               golden_target: Optional[str] = None, golden_durability: Optional[str] = None,
               docker: bool = False,
               service: Optional[Sequence[str]] = None, env: Optional[Dict[str, str]] = None,
               workdir: Optional[str] = None, user: Optional[str] = None,
               memory_bytes: Optional[int] = None, cpus: Optional[float] = None, pids: Optional[int] = None,
               mounts: Optional[List[Dict[str, Any]]] = None, network: Optional[str] = None,
               egress: Optional[List[str]] = None, ttl: Optional[float] = None, lease: Optional[float] = None,
               privileged: Optional[bool] = None, spec: Optional[Dict[str, Any]] = None, keepalive: bool = True,
               wait_for_capacity: float = 0.0, forkable: bool = False, wait: Optional[str] = None) -> Episode:
        """Creates an episode and returns it once its agent answers.

        image: as rungv takes it (oci:DIR, docker-archive:TAR, a cached name).
        golden: a golden volume on the server's host, cloned per episode and
        mounted at golden_target (/var/lib/docker); golden_durability
        "episode" (the default): a guest fsync on the clone skips the host
        flush (survives a killed episode, not a host crash; the clone is
        deleted at close anyway); "full" does not skip it. docker: publish the
        guest's port 2375 as ep.docker_socket. service: a background
        process the episode starts (dockerd). env, workdir, user, limits,
        mounts (the spec's JSON form), network ("none" or "nat"), egress:
        as the episode spec has them (spec: a whole spec dict, merged under
        these). privileged: every capability of the Sentry (not of the
        host), what dockerd needs; docker=True implies it unless False.
        ttl and lease in seconds (lease < 0: none).
        wait_for_capacity: retry a create refused at the server's cap for
        up to this many seconds (0: raise CapacityError at once).
        forkable: the episode can be forked once (Episode.fork); it runs in
        the seccomp-only isolation mode, the one with checkpoints.
        wait: when the create returns: "docker" once the episode's Docker
        daemon answers (the default with docker=True and a service),
        "agent" once the episode can exec. A daemon that exits, or does
        not answer within the server's ready timeout, fails the create
        with a GvxError whose message ends with the service's log.
        """
        sp: Dict[str, Any] = dict(spec or {})
        sp.setdefault("version", 1)
        if image:
            sp["image"] = image
        if service:
            sp["entrypoint"] = list(service)
        if env:
            sp["env"] = list(sp.get("env", [])) + [f"{k}={v}" for k, v in env.items()]
        for k, v in (("workdir", workdir), ("user", user), ("network", network)):
            if v:
                sp[k] = v
        if egress:
            sp["egress"] = list(egress)
        if privileged is None:
            privileged = True if docker else None
        if privileged is not None:
            sp["privileged"] = bool(privileged)
        if mounts:
            sp["mounts"] = list(sp.get("mounts", [])) + list(mounts)
        limits = dict(sp.get("limits", {}))
        for k, v in (("memory_bytes", memory_bytes), ("cpus", cpus), ("pids", pids)):
            if v is not None:
                limits[k] = v
        if limits:
            sp["limits"] = limits
        req: Dict[str, Any] = {"spec": sp}
        for k, v in (("golden", golden), ("golden_target", golden_target), ("golden_durability", golden_durability),
                     ("ttl", ttl), ("lease", lease)):
            if v is not None:
                req[k] = v
        if docker:
            req["docker"] = True
        if forkable:
            req["forkable"] = True
        if wait:
            req["wait"] = wait
        deadline = time.monotonic() + wait_for_capacity
        while True:
            try:
                info = self.transport.json("POST", "/v1/episodes", body=req)
                return Episode(self.transport, info, keepalive)
            except CapacityError as e:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise
                time.sleep(min(e.retry_after or 1.0, left))

    def close(self) -> None:
        """Nothing to release (one connection per request); for symmetry."""

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
