"""Errors of the gvx client: every failed request is a GvxError."""

from typing import Optional


class GvxError(Exception):
    """A request the server refused or could not carry out.

    ``status`` is the HTTP status (0 when the server could not be reached),
    ``message`` the server's error text.
    """

    def __init__(self, status: int, message: str):
        super().__init__(f"gvx: {message} (HTTP {status})" if status else f"gvx: {message}")
        self.status = status
        self.message = message


class CapacityError(GvxError):
    """The server's episode cap is reached (HTTP 429); retry after ``retry_after`` seconds."""

    def __init__(self, status: int, message: str, retry_after: Optional[float]):
        super().__init__(status, message)
        self.retry_after = retry_after


class NotFoundError(GvxError):
    """No such episode (it was closed, or its TTL or lease ran out), or no such file (HTTP 404)."""


class ConflictError(GvxError):
    """The episode cannot do that now (HTTP 409): it is starting or closing,
    or it is not forkable (the message says why and what to do)."""


class ExecError(GvxError):
    """An exec stream broke or reported an error before the command's exit."""
