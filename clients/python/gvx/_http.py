"""HTTP/1.1 over a unix socket or TCP, with the standard library only."""

import errno
import http.client
import json
import os
import socket
import stat
from typing import Any, Dict, Iterable, Iterator, Optional, Tuple, Union
from urllib.parse import urlencode, urlsplit

from .errors import CapacityError, GvxError, NotFoundError

Body = Union[None, bytes, Iterable[bytes], Any]

# The largest JSON answer read (1 MiB; Client(max_json=...) changes it). An
# answer is the server's, but what it relays (write_file's, upload's) comes
# from the episode's agent, which a privileged guest can replace: past this
# the rest is not read, the connection is closed and GvxError names the cap.
DEFAULT_MAX_JSON = 1 << 20

# The longest line of an NDJSON answer (an exec's events): one event holds
# at most the agent's read of output (a few hundred KiB, base64).
MAX_EVENT_LINE = 64 << 20


def read_capped(resp: http.client.HTTPResponse, limit: int, what: str) -> bytes:
    """At most limit bytes of resp's body: reads limit+1 at most, and raises
    GvxError naming the cap if there were more (the caller closes the
    connection, unread)."""
    out = bytearray()
    while len(out) <= limit:
        b = resp.read(min(64 << 10, limit + 1 - len(out)))
        if not b:
            return bytes(out)
        out += b
    raise GvxError(0, f"{what} is larger than {limit} bytes (gvx.DEFAULT_MAX_JSON, or the client's max_json): "
                      "not read; the episode's agent may be misbehaving")


class _UnixConnection(http.client.HTTPConnection):
    """HTTP over the unix socket path. With private set (rungv serve's
    default socket), the socket's directory is checked first (check_private_dir)
    and the socket reached through that open directory, so what is checked is
    what is connected to."""

    def __init__(self, path: str, timeout: Optional[float], private: Optional[bool] = None):
        super().__init__("localhost", timeout=timeout)
        self._path = path
        self._private = private

    def connect(self) -> None:
        dfd = None
        addr = self._path
        if self._private is not None:
            dfd = check_private_dir(os.path.dirname(self._path), exact=self._private)
            if os.path.isdir("/proc/self/fd"):
                addr = "/proc/self/fd/%d/%s" % (dfd, os.path.basename(self._path))
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if self.timeout is not None:
            s.settimeout(self.timeout)
        try:
            s.connect(addr)
        except OSError:
            s.close()
            raise
        finally:
            if dfd is not None:
                os.close(dfd)
        self.sock = s


def default_state_dir() -> Tuple[str, bool]:
    """rungv serve's default state directory, and whether it is the fallback
    in the shared temporary directory (which must be mode 0700 exactly):
    $XDG_RUNTIME_DIR/gvx-serve, else /run/gvx for root, else
    $TMPDIR/gvx-serve-UID."""
    run = os.environ.get("XDG_RUNTIME_DIR")
    if run:
        return os.path.join(run, "gvx-serve"), False
    if os.geteuid() == 0:
        return "/run/gvx", False
    tmp = os.environ.get("TMPDIR") or "/tmp"
    return os.path.join(tmp, "gvx-serve-%d" % os.geteuid()), True


def default_socket() -> str:
    """The server socket rungv serve listens on by default: $GVX_SERVE_SOCKET,
    else STATE_DIR/serve.sock with rungv serve's default state dir."""
    env = os.environ.get("GVX_SERVE_SOCKET")
    if env:
        return env
    return os.path.join(default_state_dir()[0], "serve.sock")


def check_private_dir(path: str, exact: bool = False) -> int:
    """Opens directory path without following a symlink and refuses it
    (GvxError) unless it is this user's and writable by no one else (mode
    0700 exactly with exact): another local user who made rungv serve's
    default directory first would get every request sent to a socket of
    theirs, env and all. Returns the open directory (the caller closes it).
    A missing directory raises FileNotFoundError (no server there)."""
    fix = ("remove it (rungv serve makes it again), or give the client the "
           "socket of a directory of your own (socket_path, $GVX_SERVE_SOCKET, "
           "rungv serve --state-dir, or set XDG_RUNTIME_DIR)")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            raise GvxError(0, f"default socket directory {path} is a symlink or not a directory: "
                              f"the server's directory must be a real one; {fix}") from e
        raise
    st = os.fstat(fd)
    perm = stat.S_IMODE(st.st_mode)
    me = os.geteuid()
    ok = stat.S_ISDIR(st.st_mode) and st.st_uid == me and (perm == 0o700 if exact else perm & 0o022 == 0)
    if not ok:
        os.close(fd)
        rule = "mode 0700 exactly" if exact else "not writable by others"
        raise GvxError(0, f"default socket directory {path} is owned by uid {st.st_uid}, mode {perm:04o}: "
                          f"it must be yours (uid {me}) and {rule}; {fix}")
    return fd


class Transport:
    """Opens one connection per request (the server is local: a connection
    costs little, and no state is shared between threads)."""

    def __init__(self, socket_path: Optional[str] = None, url: Optional[str] = None,
                 token: Optional[str] = None, timeout: Optional[float] = None,
                 max_json: int = DEFAULT_MAX_JSON):
        if socket_path and url:
            raise ValueError("gvx: give socket_path or url, not both")
        self.url = url
        self.socket_path = None if url else (socket_path or default_socket())
        # rungv serve's default socket (no path given, none in the
        # environment): its directory is checked before each connect, and
        # whether it is the fallback that must be 0700 exactly.
        self._private: Optional[bool] = None
        if not url and not socket_path and not os.environ.get("GVX_SERVE_SOCKET"):
            self._private = default_state_dir()[1]
        self.token = token if token is not None else os.environ.get("GVX_SERVE_TOKEN")
        self.timeout = timeout
        self.max_json = max_json
        if url:
            u = urlsplit(url)
            if u.scheme != "http" or not u.hostname:
                raise ValueError(f"gvx: url {url!r}: want http://HOST:PORT")
            self._host, self._port = u.hostname, u.port or 80

    def _connect(self, timeout: Optional[float]) -> http.client.HTTPConnection:
        t = timeout if timeout is not None else self.timeout
        if self.socket_path:
            return _UnixConnection(self.socket_path, t, self._private)
        return http.client.HTTPConnection(self._host, self._port, timeout=t)

    def request(self, method: str, path: str, query: Optional[Dict[str, Any]] = None,
                body: Body = None, headers: Optional[Dict[str, str]] = None,
                timeout: Optional[float] = None) -> Tuple[http.client.HTTPResponse, http.client.HTTPConnection]:
        """Sends a request and returns the open response (read it, then close
        the connection) once its status is 2xx; raises GvxError otherwise."""
        if query:
            path += "?" + urlencode({k: v for k, v in query.items() if v is not None})
        h = {"Host": "gvx"}
        if self.token and not self.socket_path:
            h["Authorization"] = "Bearer " + self.token
        if headers:
            h.update(headers)
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            h.setdefault("Content-Type", "application/json")
        if isinstance(body, bytes):
            h["Content-Length"] = str(len(body))
        elif body is not None and not hasattr(body, "read"):
            h["Transfer-Encoding"] = "chunked"
        conn = self._connect(timeout)
        try:
            conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
            for k, v in h.items():
                conn.putheader(k, v)
            conn.endheaders()
            if isinstance(body, bytes):
                conn.send(body)
            elif body is not None and hasattr(body, "read"):
                while True:
                    b = body.read(1 << 20)
                    if not b:
                        break
                    conn.send(b)
            elif body is not None:
                for b in body:
                    if b:
                        conn.send(b"%x\r\n%s\r\n" % (len(b), b))
                conn.send(b"0\r\n\r\n")
            resp = conn.getresponse()
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            where = self.socket_path or self.url
            raise GvxError(0, f"cannot reach the server at {where}: {e} (is rungv serve running?)") from e
        if resp.status >= 300:
            try:
                raw = resp.read(1 << 20)
            finally:
                conn.close()
            raise _error(resp, raw)
        return resp, conn

    def json(self, method: str, path: str, **kw: Any) -> Any:
        """A request whose answer is JSON (at most max_json bytes)."""
        resp, conn = self.request(method, path, **kw)
        what = f"the answer to {method} {path.split('?')[0]}"
        try:
            raw = read_capped(resp, self.max_json, what)
        finally:
            conn.close()
        return _decode(raw, what) if raw else None

    def lines(self, method: str, path: str, **kw: Any) -> Iterator[dict]:
        """A request whose answer is NDJSON: yields each line's object."""
        resp, conn = self.request(method, path, **kw)
        try:
            while True:
                line = resp.readline(MAX_EVENT_LINE + 1)
                if not line:
                    return
                if len(line) > MAX_EVENT_LINE:
                    raise GvxError(0, f"a line of the answer to {method} {path.split('?')[0]} is longer than "
                                      f"{MAX_EVENT_LINE} bytes: not read; the episode's agent may be misbehaving")
                line = line.strip()
                if line:
                    yield _decode(line, f"an event of {method} {path.split('?')[0]}")
        finally:
            conn.close()


def _decode(raw: bytes, what: str) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as e:
        raise GvxError(0, f"{what} is not JSON: {e}") from None


def _error(resp: http.client.HTTPResponse, raw: bytes) -> GvxError:
    try:
        msg = json.loads(raw).get("error") or raw.decode(errors="replace")
    except ValueError:
        msg = raw.decode(errors="replace").strip() or resp.reason
    if resp.status == 429:
        ra = resp.getheader("Retry-After")
        try:
            after = float(ra) if ra is not None else None
        except ValueError:
            after = None
        return CapacityError(resp.status, msg, after)
    if resp.status == 404:
        return NotFoundError(resp.status, msg)
    return GvxError(resp.status, msg)
