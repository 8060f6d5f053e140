"""The asyncio client: AsyncClient and AsyncEpisode mirror Client and Episode
with coroutines.

Each call runs the synchronous client on a thread pool of the client's own
(max_workers, default 64), so hundreds of coroutines can drive episodes at
once without blocking the event loop; calls beyond max_workers wait for a
thread.
"""

import asyncio
import concurrent.futures
import functools
import inspect
import socket
import threading
from typing import Any, AsyncIterator, Callable, Dict, Iterator, List, Optional

from ._http import DEFAULT_MAX_JSON
from .client import DEFAULT_MAX_OUTPUT, Client, Episode, ExecResult, FileBytes, Fold, exec_request

# How many events (or log chunks) a stream holds ahead of its consumer:
# the thread reading the connection waits beyond it.
_STREAM_AHEAD = 64
_END = object()


async def _stream(run: Callable[..., Any], open_iter: Callable[[Callable[[Any], None]], Iterator[Any]]) -> AsyncIterator[Any]:
    """Yields, on the event loop, what a blocking iterator yields on one of
    the client's threads (run). open_iter(on_open) makes the iterator and
    passes on_open its connection, which is cut when the consumer stops
    early (aclose, break, cancellation), so the thread ends too."""
    loop = asyncio.get_running_loop()
    q: asyncio.Queue = asyncio.Queue(_STREAM_AHEAD)
    stop = threading.Event()
    conns: List[Any] = []

    def on_open(conn: Any) -> None:
        conns.append(conn)
        if stop.is_set():
            _cut(conn)

    def put(item: Any) -> bool:
        if stop.is_set():
            return False
        fut = asyncio.run_coroutine_threadsafe(q.put(item), loop)
        while True:
            try:
                fut.result(0.25)
                return True
            except concurrent.futures.TimeoutError:
                if stop.is_set():
                    fut.cancel()
                    return False

    def pump() -> None:
        it = None
        try:
            it = open_iter(on_open)
            for item in it:
                if not put(item):
                    return
            put(_END)
        except BaseException as e:  # noqa: B902 - handed to the consumer
            put(e)
        finally:
            close = getattr(it, "close", None)
            if close is not None:
                close()

    task = asyncio.ensure_future(run(pump))
    try:
        while True:
            item = await q.get()
            if item is _END:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        for c in conns:
            _cut(c)
        try:
            await asyncio.shield(task)
        except Exception:
            pass


def _cut(conn: Any) -> None:
    """Shuts a connection's socket down from another thread: a read in
    progress on it returns."""
    sock = getattr(conn, "sock", None)
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class AsyncEpisode:
    """An episode, with coroutine methods. ``async with`` closes it.

    Example::

        async with gvx.AsyncClient() as c:
            async with await c.create("oci:/srv/images/busybox") as ep:
                r = await ep.exec("uname -a")
    """

    def __init__(self, episode: Episode, run: Callable[..., Any]):
        self.episode = episode
        self.id = episode.id
        self.info = episode.info
        self.docker_socket = episode.docker_socket
        self._run = run

    def __repr__(self) -> str:
        return f"<gvx.AsyncEpisode {self.id}>"

    def exec_stream(self, cmd: Any, env: Optional[Dict[str, str]] = None, workdir: Optional[str] = None,
                    timeout: Optional[float] = None, stdin: Any = None) -> AsyncIterator[dict]:
        """As Episode.exec_stream, an async iterator: ``async for ev in
        ep.exec_stream("make")`` yields the events as they come, on the
        event loop. Leaving the loop early closes the connection (the
        command is then killed by the server)."""
        req = exec_request(cmd, env, workdir, timeout, stdin)
        t = self.episode._t
        path = f"/v1/episodes/{self.id}/exec"
        return _stream(self._run, lambda on_open: t.lines("POST", path, body=req, on_open=on_open))

    async def exec(self, cmd: Any, env: Optional[Dict[str, str]] = None, workdir: Optional[str] = None,
                   timeout: Optional[float] = None, stdin: Any = None,
                   on_output: Optional[Callable[[str, bytes], Any]] = None,
                   max_output: Optional[int] = DEFAULT_MAX_OUTPUT) -> ExecResult:
        """As Episode.exec; on_output(stream, bytes) is called on the event
        loop (a coroutine function is awaited), never on a worker thread."""
        f = Fold(max_output)
        async for ev in self.exec_stream(cmd, env, workdir, timeout, stdin):
            out = f.add(ev)
            if out is not None and on_output is not None:
                r = on_output(*out)
                if inspect.isawaitable(r):
                    await r
            if f.result is not None:
                break
        return f.end()

    async def read_file(self, path: str, **kw: Any) -> FileBytes:
        """As Episode.read_file (max_bytes): bytes with ``mode``."""
        return await self._run(self.episode.read_file, path, **kw)

    async def service(self) -> Optional[Dict[str, Any]]:
        """As Episode.service."""
        return await self._run(self.episode.service)

    async def service_log(self, **kw: Any) -> bytes:
        """As Episode.service_log."""
        return await self._run(self.episode.service_log, **kw)

    def service_log_stream(self) -> AsyncIterator[bytes]:
        """As Episode.service_log_stream, an async iterator on the loop."""
        t = self.episode._t
        path = f"/v1/episodes/{self.id}/service/log"

        def chunks(on_open: Callable[[Any], None]) -> Iterator[bytes]:
            resp, conn = t.request("GET", path, query={"follow": "1"})
            on_open(conn)
            try:
                while True:
                    b = resp.read1(64 << 10)
                    if not b:
                        return
                    yield b
            finally:
                conn.close()
        return _stream(self._run, chunks)

    async def write_file(self, path: str, data: Any, mode: int = 0o644) -> None:
        return await self._run(self.episode.write_file, path, data, mode)

    async def upload(self, local_path: str, remote_dir: str) -> Dict[str, Any]:
        return await self._run(self.episode.upload, local_path, remote_dir)

    async def upload_tar(self, tar_bytes: bytes, remote_dir: str) -> Dict[str, Any]:
        return await self._run(self.episode.upload_tar, tar_bytes, remote_dir)

    async def download(self, remote_path: str, local_dir: str, **kw: Any) -> str:
        """As Episode.download (max_bytes)."""
        return await self._run(self.episode.download, remote_path, local_dir, **kw)

    async def download_tar(self, remote_path: str, **kw: Any) -> bytes:
        """As Episode.download_tar (max_bytes)."""
        return await self._run(self.episode.download_tar, remote_path, **kw)

    async def renew(self) -> Dict[str, Any]:
        return await self._run(self.episode.renew)

    async def describe(self) -> Dict[str, Any]:
        return await self._run(self.episode.describe)

    async def fork(self, n: int, **kw: Any) -> List["AsyncEpisode"]:
        kids = await self._run(self.episode.fork, n, **kw)
        return [AsyncEpisode(k, self._run) for k in kids]

    async def close(self) -> None:
        await self._run(self.episode.close)

    async def __aenter__(self) -> "AsyncEpisode":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


class AsyncClient:
    """Client with coroutine methods; the same arguments as Client (max_json
    too), plus max_workers (the thread pool's size).

    Example::

        async def main():
            async with gvx.AsyncClient() as c:
                eps = await asyncio.gather(*(c.create("oci:/srv/busybox") for _ in range(8)))
                results = await asyncio.gather(*(ep.exec("hostname") for ep in eps))
                await asyncio.gather(*(ep.close() for ep in eps))
    """

    def __init__(self, socket_path: Optional[str] = None, url: Optional[str] = None,
                 token: Optional[str] = None, timeout: Optional[float] = None, max_workers: int = 64,
                 max_json: int = DEFAULT_MAX_JSON):
        self.client = Client(socket_path, url, token, timeout, max_json)
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="gvx")

    async def _run(self, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(fn, *args, **kw))

    async def health(self) -> Dict[str, Any]:
        return await self._run(self.client.health)

    async def metrics(self) -> str:
        return await self._run(self.client.metrics)

    async def list(self) -> List[Dict[str, Any]]:
        return await self._run(self.client.list)

    async def create(self, image: Optional[str] = None, **kw: Any) -> AsyncEpisode:
        """As Client.create."""
        ep = await self._run(self.client.create, image, **kw)
        return AsyncEpisode(ep, self._run)

    async def episode(self, episode_id: str, keepalive: bool = False) -> AsyncEpisode:
        return AsyncEpisode(await self._run(self.client.episode, episode_id, keepalive), self._run)

    async def close(self) -> None:
        """Shuts the thread pool down (episodes are closed by their owners)."""
        self._pool.shutdown(wait=False)

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()
