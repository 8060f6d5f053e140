"""A SWE-ReX-style runtime: the method names and request/response fields of
SWE-ReX's AbstractRuntime (is_alive, create_session, run_in_session,
close_session, execute, read_file, write_file, upload, close), as
coroutines, over one gvx episode — so an agent written against SWE-ReX's
RemoteRuntime can drive gvx instead.

Requests may be SWE-ReX's own pydantic models or this module's dataclasses
of the same names and fields (only attributes are read). Responses are
this module's dataclasses, with SWE-ReX's field names.

Sessions are emulated, not a live bash: each session keeps its working
directory and exported variables in the guest (under /tmp/.gvx-sessions)
and every command runs in a fresh /bin/sh that restores them; output is
stdout and stderr merged, as a SWE-ReX session shows it. Interactive
programs (is_interactive_command, expect) are not supported.
"""

import os
import shlex
from dataclasses import dataclass, field
from typing import Any, List, Optional, Union

from .aio import AsyncClient, AsyncEpisode
from .errors import GvxError


@dataclass
class CreateSessionRequest:
    session: str = "default"
    startup_source: List[str] = field(default_factory=list)


@dataclass
class CreateSessionResponse:
    output: str = ""


@dataclass
class Action:
    command: str = ""
    session: str = "default"
    timeout: Optional[float] = None
    check: str = "raise"  # "raise", "silent" or "ignore", as SWE-ReX's BashAction


@dataclass
class Observation:
    output: str = ""
    exit_code: Optional[int] = None
    failure_reason: str = ""
    expect_string: str = ""


@dataclass
class CloseSessionRequest:
    session: str = "default"


@dataclass
class CloseSessionResponse:
    pass


@dataclass
class Command:
    command: Union[str, List[str]] = ""
    timeout: Optional[float] = None
    shell: bool = False
    check: bool = False
    env: Optional[dict] = None
    cwd: Optional[str] = None


@dataclass
class CommandResponse:
    stdout: str = ""
    stderr: str = ""
    exit_code: Optional[int] = None


@dataclass
class ReadFileRequest:
    path: str = ""


@dataclass
class ReadFileResponse:
    content: str = ""


@dataclass
class WriteFileRequest:
    content: str = ""
    path: str = ""


@dataclass
class WriteFileResponse:
    pass


@dataclass
class UploadRequest:
    source_path: str = ""
    target_path: str = ""


@dataclass
class UploadResponse:
    pass


@dataclass
class IsAliveResponse:
    is_alive: bool = False
    message: str = ""

    def __bool__(self) -> bool:
        return self.is_alive


@dataclass
class CloseResponse:
    pass


class SessionError(GvxError):
    """A session that does not exist, exists already, or a command that failed under check="raise"."""

    def __init__(self, message: str):
        super().__init__(0, message)


_SESSIONS = "/tmp/.gvx-sessions"


def _session_dir(name: str) -> str:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or "default"
    return f"{_SESSIONS}/{safe}"


class SweRexRuntime:
    """SWE-ReX's runtime interface over a gvx episode.

    Example::

        rt = await gvx.SweRexRuntime.start(gvx.AsyncClient(), image="oci:/srv/images/busybox")
        await rt.create_session(CreateSessionRequest(session="default"))
        obs = await rt.run_in_session(Action(command="cd /tmp && export X=1"))
        obs = await rt.run_in_session(Action(command="pwd; echo $X"))
        assert obs.output == "/tmp\\n1\\n" and obs.exit_code == 0
        await rt.close()
    """

    def __init__(self, episode: AsyncEpisode):
        self.episode = episode
        self._sessions: set = set()

    @classmethod
    async def start(cls, client: AsyncClient, **create: Any) -> "SweRexRuntime":
        """Creates an episode (Client.create's arguments) and a runtime on it."""
        return cls(await client.create(**create))

    async def is_alive(self, *, timeout: Optional[float] = None) -> IsAliveResponse:
        try:
            r = await self.episode.exec(["true"], timeout=timeout)
            return IsAliveResponse(is_alive=r.exit_code == 0)
        except GvxError as e:
            return IsAliveResponse(is_alive=False, message=str(e))

    async def create_session(self, request: Any = None) -> CreateSessionResponse:
        name = getattr(request, "session", "default") if request is not None else "default"
        if name in self._sessions:
            raise SessionError(f"session {name!r} exists already")
        d = _session_dir(name)
        script = f"rm -rf {d} && mkdir -p {d} && pwd > {d}/cwd && : > {d}/env"
        out = ""
        for src in getattr(request, "startup_source", None) or []:
            script += f" && {self._wrap(name, '. ' + shlex.quote(src))}"
        r = await self.episode.exec(script)
        out = r.output
        if r.exit_code != 0:
            raise SessionError(f"create session {name!r}: {out}")
        self._sessions.add(name)
        return CreateSessionResponse(output=out)

    @staticmethod
    def _wrap(name: str, command: str) -> str:
        """command run in the session's directory and environment, which it
        may change: both are saved when its shell exits (an exit in the
        command included), and its status kept."""
        d = _session_dir(name)
        body = (
            f"trap 'r=$?; pwd > {d}/cwd; export -p > {d}/env; exit $r' EXIT\n"
            f'cd "$(cat {d}/cwd)" 2>/dev/null; . {d}/env\n'
            f"{command}\n"
        )
        return "sh -c " + shlex.quote(body) + " 2>&1"

    async def run_in_session(self, action: Any) -> Observation:
        name = getattr(action, "session", "default")
        if name not in self._sessions:
            raise SessionError(f"session {name!r} does not exist (create_session first)")
        r = await self.episode.exec(self._wrap(name, action.command), timeout=getattr(action, "timeout", None))
        obs = Observation(output=r.output, exit_code=r.exit_code)
        if r.timed_out:
            obs.failure_reason = f"timed out after {action.timeout}s"
        check = getattr(action, "check", "raise")
        if check == "raise" and (r.exit_code != 0 or r.timed_out):
            raise SessionError(f"command {action.command!r} exited {r.exit_code}: {obs.output[-2000:]}")
        if check == "ignore":
            obs.exit_code = None
        return obs

    async def close_session(self, request: Any = None) -> CloseSessionResponse:
        name = getattr(request, "session", "default") if request is not None else "default"
        if name not in self._sessions:
            raise SessionError(f"session {name!r} does not exist")
        self._sessions.discard(name)
        await self.episode.exec(["rm", "-rf", _session_dir(name)])
        return CloseSessionResponse()

    async def execute(self, command: Any) -> CommandResponse:
        cmd = command.command
        if getattr(command, "shell", False) and not isinstance(cmd, str):
            cmd = " ".join(cmd)
        elif not getattr(command, "shell", False) and isinstance(cmd, str):
            cmd = shlex.split(cmd)
        r = await self.episode.exec(cmd, timeout=getattr(command, "timeout", None),
                                    env=getattr(command, "env", None), workdir=getattr(command, "cwd", None))
        resp = CommandResponse(stdout=r.stdout.decode(errors="replace"), stderr=r.stderr.decode(errors="replace"),
                               exit_code=r.exit_code)
        if getattr(command, "check", False) and r.exit_code != 0:
            raise SessionError(f"command {command.command!r} exited {r.exit_code}: {resp.stderr[-2000:]}")
        return resp

    async def read_file(self, request: Any) -> ReadFileResponse:
        data = await self.episode.read_file(request.path)
        return ReadFileResponse(content=data.decode(errors="replace"))

    async def write_file(self, request: Any) -> WriteFileResponse:
        await self.episode.write_file(request.path, request.content)
        return WriteFileResponse()

    async def upload(self, request: Any) -> UploadResponse:
        """Copies the local source_path (file or directory) to the guest
        path target_path (its new name, as SWE-ReX's upload does)."""
        src, dst = request.source_path, request.target_path.rstrip("/") or "/"
        from .client import tar_paths  # a tar whose top entry is the target's name
        await self.episode.upload_tar(tar_paths(src, arcname=os.path.basename(dst)), os.path.dirname(dst) or "/")
        return UploadResponse()

    async def close(self) -> CloseResponse:
        """Tears the episode down."""
        self._sessions.clear()
        await self.episode.close()
        return CloseResponse()
