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
and every command runs in a fresh shell that restores them (bash where the
image has it, as SWE-ReX's sessions are; else sh); output is stdout and
stderr merged, as a SWE-ReX session shows it. Interactive programs
(is_interactive_command, expect) are not supported.

Failures are raised as SWE-ReX raises them, with its exception names
(this module's classes, GvxErrors too): a command past its timeout raises
CommandTimeoutError (a TimeoutError) from execute and run_in_session alike,
whatever check says; a non-zero exit under check raises
NonZeroExitCodeError; a session that exists already SessionExistsError,
one that does not SessionDoesNotExistError (both ValueErrors). The
timeout's exception carries what the command printed (``.result``).
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
    error_msg: str = ""


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
    error_msg: str = ""
    merge_output_streams: bool = False


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
    """What this runtime raises (SWE-ReX's SwerexException): a session that
    does not exist, exists already, a command that failed under check, or
    one that timed out."""

    def __init__(self, message: str):
        super().__init__(0, message)


class NonZeroExitCodeError(SessionError, RuntimeError):
    """A command exited non-zero under check (SWE-ReX's)."""


class CommandTimeoutError(SessionError, RuntimeError, TimeoutError):
    """A command ran past its timeout and was killed (SWE-ReX's).
    ``result`` is the gvx ExecResult: what it printed until then."""

    def __init__(self, message: str, result: Any = None):
        super().__init__(message)
        self.result = result


class SessionExistsError(SessionError, ValueError):
    """create_session of a name in use (SWE-ReX's)."""


class SessionDoesNotExistError(SessionError, ValueError):
    """A session not created, or closed (SWE-ReX's)."""


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
        self._shell: Optional[str] = None

    async def _session_shell(self) -> str:
        """bash where the image has it (SWE-ReX's sessions are bash), else sh."""
        if self._shell is None:
            from .gym import _WHICH
            r = await self.episode.exec(["sh", "-c", _WHICH, "sh", "bash"])
            path = r.stdout.decode(errors="replace").strip()
            self._shell = path if r.exit_code == 0 and path.startswith("/") else "sh"
        return self._shell

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
            raise SessionExistsError(f"session {name} already exists")
        d = _session_dir(name)
        shell = await self._session_shell()
        script = f"rm -rf {d} && mkdir -p {d} && pwd > {d}/cwd && : > {d}/env"
        out = ""
        for src in getattr(request, "startup_source", None) or []:
            script += f" && {self._wrap(name, '. ' + shlex.quote(src), shell)}"
        r = await self.episode.exec(script)
        out = r.output
        if r.exit_code != 0:
            raise SessionError(f"create session {name!r}: {out}")
        self._sessions.add(name)
        return CreateSessionResponse(output=out)

    @staticmethod
    def _wrap(name: str, command: str, shell: str = "sh") -> str:
        """command run in the session's directory and environment, which it
        may change: both are saved when its shell exits (an exit in the
        command included), and its status kept."""
        d = _session_dir(name)
        body = (
            f"trap 'r=$?; pwd > {d}/cwd; export -p > {d}/env; exit $r' EXIT\n"
            f'cd "$(cat {d}/cwd)" 2>/dev/null; . {d}/env\n'
            f"{command}\n"
        )
        return shlex.quote(shell) + " -c " + shlex.quote(body) + " 2>&1"

    async def run_in_session(self, action: Any) -> Observation:
        name = getattr(action, "session", "default")
        if name not in self._sessions:
            raise SessionDoesNotExistError(f"session {name!r} does not exist")
        timeout = getattr(action, "timeout", None)
        r = await self.episode.exec(self._wrap(name, action.command, await self._session_shell()), timeout=timeout)
        if r.timed_out:
            raise CommandTimeoutError(f"timeout after {timeout} seconds while running command {action.command!r}", r)
        obs = Observation(output=r.output, exit_code=r.exit_code)
        check = getattr(action, "check", "raise")
        if check == "raise" and r.exit_code != 0:
            msg = f"Command {action.command!r} failed with exit code {r.exit_code}. Here is the output:\n{obs.output[-2000:]!r}"
            if getattr(action, "error_msg", ""):
                msg = f"{action.error_msg}: {msg}"
            raise NonZeroExitCodeError(msg)
        if check == "ignore":
            obs.exit_code = None
        return obs

    async def close_session(self, request: Any = None) -> CloseSessionResponse:
        name = getattr(request, "session", "default") if request is not None else "default"
        if name not in self._sessions:
            raise SessionDoesNotExistError(f"session {name!r} does not exist")
        self._sessions.discard(name)
        await self.episode.exec(["rm", "-rf", _session_dir(name)])
        return CloseSessionResponse()

    async def execute(self, command: Any) -> CommandResponse:
        cmd = command.command
        if getattr(command, "shell", False) and not isinstance(cmd, str):
            cmd = " ".join(cmd)
        elif not getattr(command, "shell", False) and isinstance(cmd, str):
            cmd = shlex.split(cmd)
        timeout = getattr(command, "timeout", None)
        if getattr(command, "merge_output_streams", False):
            argv = ["sh", "-c", 'exec "$@" 2>&1', "sh"] + (["sh", "-c", cmd] if isinstance(cmd, str) else list(cmd))
            cmd = argv
        r = await self.episode.exec(cmd, timeout=timeout, env=getattr(command, "env", None),
                                    workdir=getattr(command, "cwd", None))
        if r.timed_out:
            raise CommandTimeoutError(f"Timeout ({timeout}s) exceeded while running command", r)
        resp = CommandResponse(stdout=r.stdout.decode(errors="backslashreplace"),
                               stderr=r.stderr.decode(errors="backslashreplace"), exit_code=r.exit_code)
        if getattr(command, "check", False) and r.exit_code != 0:
            msg = (f"Command {command.command!r} failed with exit code {r.exit_code}. "
                   f"Stdout:\n{resp.stdout[-2000:]!r}\nStderr:\n{resp.stderr[-2000:]!r}")
            if getattr(command, "error_msg", ""):
                msg = f"{command.error_msg}: {msg}"
            raise NonZeroExitCodeError(msg)
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
