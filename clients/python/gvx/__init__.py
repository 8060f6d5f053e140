"""gvx: the Python client of the gvx episode server (rungv serve).

Standard library only, Python >= 3.9. Client and Episode are synchronous;
AsyncClient and AsyncEpisode are their asyncio twins; GymEnv is a gym-style
adapter (reset/step/close), SweRexRuntime a SWE-ReX-style one (the method
names of SWE-ReX's runtime). See README.md and docs/api.md in the gvx
repository.

Example::

    import gvx
    with gvx.Client() as c, c.create("oci:/srv/images/busybox") as ep:
        print(ep.exec("echo hi").stdout)
"""

from ._http import DEFAULT_MAX_JSON
from ._untar import DEFAULT_MAX_DOWNLOAD, DEFAULT_MAX_MEMBERS
from .aio import AsyncClient, AsyncEpisode
from .client import Client, Episode, ExecResult, untar
from .errors import CapacityError, ExecError, GvxError, NotFoundError
from .gym import GymEnv
from .swerex import SweRexRuntime

__all__ = [
    "AsyncClient", "AsyncEpisode", "CapacityError", "DEFAULT_MAX_DOWNLOAD", "DEFAULT_MAX_JSON",
    "DEFAULT_MAX_MEMBERS", "Client", "Episode", "ExecError", "ExecResult",
    "GvxError", "GymEnv", "NotFoundError", "SweRexRuntime", "untar",
]
__version__ = "0.1.0"
