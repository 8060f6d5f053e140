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
from typing import Any, Callable, Dict, List, Optional

from ._http import DEFAULT_MAX_JSON
from .client import Client, Episode, ExecResult


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

    async def exec(self, cmd: Any, **kw: Any) -> ExecResult:
        """As Episode.exec."""
        return await self._run(self.episode.exec, cmd, **kw)

    async def read_file(self, path: str, **kw: Any) -> bytes:
        """As Episode.read_file (max_bytes)."""
        return await self._run(self.episode.read_file, path, **kw)

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
