"""A gym-style adapter: each reset() is a fresh episode, each step() runs one
shell command in it (the shape R2E-Gym and SkyRL-Gym environments take)."""

from typing import Any, Callable, Dict, Optional, Tuple

from .client import Client, Episode, ExecResult

Reward = Callable[[Episode, str, ExecResult], Tuple[float, bool]]


class GymEnv:
    """reset() / step(action) / close() over gvx episodes.

    The observation is the command's output as text (stdout, then stderr);
    info holds the ExecResult. reward_fn(episode, action, result) returns
    (reward, terminated); without one the reward is 0.0 and an episode ends
    only by max_steps (truncated). setup, if given, is run on each fresh
    episode by reset(); its output is reset()'s observation.

    Example::

        env = gvx.GymEnv(gvx.Client(), image="oci:/srv/images/busybox",
                         golden="/srv/golden.ext4", max_steps=20)
        obs, info = env.reset()
        obs, reward, terminated, truncated, info = env.step("ls /var/lib/docker")
        env.close()
    """

    def __init__(self, client: Client, reward_fn: Optional[Reward] = None, max_steps: int = 0,
                 setup: Optional[str] = None, step_timeout: Optional[float] = None, **create: Any):
        self.client = client
        self.reward_fn = reward_fn
        self.max_steps = max_steps
        self.setup = setup
        self.step_timeout = step_timeout
        self.create_args = create
        self.episode: Optional[Episode] = None
        self.steps = 0

    def reset(self, *, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None) -> Tuple[str, Dict[str, Any]]:
        """Closes the current episode (if any), creates a fresh one, and
        returns (observation, info)."""
        self.close()
        self.episode = self.client.create(**self.create_args)
        self.steps = 0
        info: Dict[str, Any] = {"episode_id": self.episode.id}
        if self.setup:
            r = self.episode.exec(self.setup, timeout=self.step_timeout)
            info["setup"] = r
            return r.output, info
        return "", info

    def step(self, action: str) -> Tuple[str, float, bool, bool, Dict[str, Any]]:
        """Runs action (a shell command); returns (observation, reward,
        terminated, truncated, info)."""
        if self.episode is None:
            raise RuntimeError("gvx: GymEnv.step before reset")
        r = self.episode.exec(action, timeout=self.step_timeout)
        self.steps += 1
        reward, terminated = (0.0, False)
        if self.reward_fn:
            reward, terminated = self.reward_fn(self.episode, action, r)
        truncated = bool(self.max_steps) and self.steps >= self.max_steps and not terminated
        return r.output, float(reward), bool(terminated), truncated, {"result": r, "episode_id": self.episode.id}

    def close(self) -> None:
        """Tears the current episode down."""
        if self.episode is not None:
            self.episode.close()
            self.episode = None
