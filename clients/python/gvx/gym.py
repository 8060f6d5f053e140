"""A gym-style adapter: each reset() is a fresh episode, each step() runs one
shell command in it (the shape R2E-Gym and SkyRL-Gym environments take),
with the file helpers such environments use to put a task in and take
results out."""

from typing import Any, Callable, Dict, Optional, Tuple, Union

from .client import Client, Episode, ExecResult, FileBytes
from .errors import GvxError

Reward = Callable[[Episode, str, ExecResult], Tuple[float, bool]]

# The shells "auto" tries, in order: bash where the image has it (what
# R2E-Gym's and SWE-bench's commands are written for), else POSIX sh.
_AUTO_SHELLS = ("bash", "sh")

# The path of the program $1 (a path, or a name looked up on $PATH).
_WHICH = (
    'case "$1" in */*) [ -x "$1" ] && [ ! -d "$1" ] && echo "$1" && exit 0; exit 1;; esac; '
    'IFS=:; for d in ${PATH:-/usr/local/bin:/usr/bin:/bin}; do '
    '[ -n "$d" ] && [ -x "$d/$1" ] && [ ! -d "$d/$1" ] && { echo "$d/$1"; exit 0; }; done; exit 1'
)


class GymEnv:
    """reset() / step(action) / close() over gvx episodes.

    The observation is the command's output as text (stdout, then stderr);
    info holds the ExecResult. reward_fn(episode, action, result) returns
    (reward, terminated); without one the reward is 0.0 and an episode ends
    only by max_steps (truncated). setup, if given, is run on each fresh
    episode by reset(); its output is reset()'s observation.

    shell runs each step (and setup) as ``SHELL -c ACTION``: "auto" (the
    default) is bash where the image has it, else sh; or a name or path
    ("bash", "/bin/sh"). A shell the image lacks fails reset() with a
    GvxError naming it. step_workdir, if given, is each step's directory.

    Files: read_file (bytes with .mode), write_file, upload (a local file
    or directory into a guest directory), download (a guest path into a
    local directory), all on the current episode.

    Example::

        env = gvx.GymEnv(gvx.Client(), image="oci:/srv/images/busybox",
                         golden="/srv/golden.ext4", max_steps=20)
        obs, info = env.reset()
        env.upload("./task", "/work")
        obs, reward, terminated, truncated, info = env.step("cd /work/task && make test")
        env.close()
    """

    def __init__(self, client: Client, reward_fn: Optional[Reward] = None, max_steps: int = 0,
                 setup: Optional[str] = None, step_timeout: Optional[float] = None,
                 shell: str = "auto", step_workdir: Optional[str] = None, **create: Any):
        if not shell:
            raise ValueError("gvx: GymEnv shell: want \"auto\", a shell's name or its path")
        self.client = client
        self.reward_fn = reward_fn
        self.max_steps = max_steps
        self.setup = setup
        self.step_timeout = step_timeout
        self.shell_choice = shell
        self.step_workdir = step_workdir
        self.create_args = create
        self.episode: Optional[Episode] = None
        # The shell steps run under in the current episode (its path).
        self.shell: Optional[str] = None
        self.steps = 0

    def _find_shell(self, ep: Episode) -> str:
        """The path of the shell to run steps with, as the image has it."""
        names = _AUTO_SHELLS if self.shell_choice == "auto" else (self.shell_choice,)
        for name in names:
            # Found on $PATH by hand: busybox's `command -v sh` answers "sh"
            # (an applet) rather than the program's path.
            r = ep.exec(["sh", "-c", _WHICH, "sh", name])
            path = r.stdout.decode(errors="replace").strip()
            if r.exit_code == 0 and path.startswith("/"):
                return path
        raise GvxError(0, f"the episode's image has no shell {' or '.join(names)} "
                          f"(GymEnv(shell=...): \"auto\", a name or a path the image has)")

    def _run(self, action: str) -> ExecResult:
        assert self.episode is not None and self.shell is not None
        return self.episode.exec([self.shell, "-c", action], timeout=self.step_timeout,
                                 workdir=self.step_workdir)

    def reset(self, *, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None) -> Tuple[str, Dict[str, Any]]:
        """Closes the current episode (if any), creates a fresh one, and
        returns (observation, info); info["shell"] is the shell steps run
        under."""
        self.close()
        self.episode = self.client.create(**self.create_args)
        self.steps = 0
        try:
            self.shell = self._find_shell(self.episode)
        except BaseException:
            self.close()
            raise
        info: Dict[str, Any] = {"episode_id": self.episode.id, "shell": self.shell}
        if self.setup:
            r = self._run(self.setup)
            info["setup"] = r
            return r.output, info
        return "", info

    def step(self, action: str) -> Tuple[str, float, bool, bool, Dict[str, Any]]:
        """Runs action (a shell command); returns (observation, reward,
        terminated, truncated, info)."""
        ep = self._need()
        r = self._run(action)
        self.steps += 1
        reward, terminated = (0.0, False)
        if self.reward_fn:
            reward, terminated = self.reward_fn(ep, action, r)
        truncated = bool(self.max_steps) and self.steps >= self.max_steps and not terminated
        return r.output, float(reward), bool(terminated), truncated, {"result": r, "episode_id": ep.id}

    def _need(self) -> Episode:
        if self.episode is None:
            raise RuntimeError("gvx: GymEnv used before reset()")
        return self.episode

    def read_file(self, path: str, **kw: Any) -> FileBytes:
        """The guest file's bytes, with .mode (Episode.read_file)."""
        return self._need().read_file(path, **kw)

    def write_file(self, path: str, data: Union[bytes, str], mode: int = 0o644) -> None:
        """Writes the guest file (parents made)."""
        self._need().write_file(path, data, mode)

    def upload(self, local_path: str, remote_dir: str) -> Dict[str, Any]:
        """Copies a local file or directory into the guest directory
        remote_dir (remote_dir/basename)."""
        return self._need().upload(local_path, remote_dir)

    def download(self, remote_path: str, local_dir: str, **kw: Any) -> str:
        """Copies the guest file or directory into local_dir (unpacked as
        an attacker's archive: Episode.download); returns its local path."""
        return self._need().download(remote_path, local_dir, **kw)

    def close(self) -> None:
        """Tears the current episode down."""
        if self.episode is not None:
            self.episode.close()
            self.episode = None
            self.shell = None
