"""Unpacking a tar from the guest onto the host, as a hostile guest may
have written it.

The guest, and so the in-guest agent that packs the archive, is hostile: it
may name entries ``../x`` or ``/etc/x``, put an entry beneath a symlink it
sent earlier (``esc -> x/..``, then ``esc/evil``), link to host files, or
send an endless stream. So nothing here follows a symlink while writing:
every directory on an entry's way is opened relative to the one before it
with ``O_NOFOLLOW``, and each file is created in the directory descriptor it
lands in. Checking names against ``realpath`` before extracting (what this
client did first) is not enough: a link's meaning depends on links the same
archive makes later, and ``x -> .`` then ``esc -> x/..`` walked out.

What is kept: directories, regular files, symlinks and hard links, with
their permission bits (setuid, setgid and sticky dropped; directories keep
the owner's rwx) and mtimes; the files belong to the caller (owners are not
kept). Extended headers (pax, GNU long names) are at most 1 MiB each. Devices and fifos are
skipped. A symlink whose target leaves ``local_dir`` (an absolute target, or
one that climbs out, through other links included, resolved on the finished
tree) is not kept, and the download fails once the rest is unpacked, naming
it, so that nothing the caller later opens inside ``local_dir`` leads out of
it. Any other error stops the download and leaves what was unpacked before
it in place (minus such links).
"""

import errno
import os
import stat
import tarfile
from typing import BinaryIO, List, Optional, Tuple

from .errors import GvxError

# The default cap on what one download reads (the archive's bytes, headers
# included): a guest could otherwise send an endless stream.
DEFAULT_MAX_DOWNLOAD = 8 << 30

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC
_MAX_LINK_HOPS = 40  # as the kernel's MAXSYMLINKS


class CappedReader:
    """Reads src, refusing to go past max_bytes (None: no cap)."""

    def __init__(self, src: BinaryIO, max_bytes: Optional[int], what: str):
        self._src = src
        self._left = max_bytes
        self._max = max_bytes
        self._what = what

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0:  # all of it, a MiB at a time (never a buffer of the cap's size)
            out = []
            while True:
                b = self.read(1 << 20)
                if not b:
                    return b"".join(out)
                out.append(b)
        if self._left is None:
            return self._src.read(n)
        b = self._src.read(min(n, self._left + 1))
        self._left -= len(b)
        if self._left < 0:
            raise GvxError(0, f"{self._what} is larger than max_bytes={self._max}; pass a larger max_bytes to read it")
        return b


# The largest pax or GNU long-name header read: tarfile reads such a header
# whole into memory, and its size is the sender's to choose.
_MAX_EXT_HEADER = 1 << 20


class _TarInfo(tarfile.TarInfo):
    """tarfile.TarInfo with a bound on extended headers' sizes."""

    def _proc_pax(self, tf):  # type: ignore[override]
        if self.size > _MAX_EXT_HEADER:
            raise tarfile.HeaderError(f"a pax header of {self.size} bytes (at most {_MAX_EXT_HEADER})")
        return super()._proc_pax(tf)  # type: ignore[misc]

    def _proc_gnulong(self, tf):  # type: ignore[override]
        if self.size > _MAX_EXT_HEADER:
            raise tarfile.HeaderError(f"a GNU long name of {self.size} bytes (at most {_MAX_EXT_HEADER})")
        return super()._proc_gnulong(tf)  # type: ignore[misc]


def _utime(fd: int, mtime: float) -> None:
    try:
        os.utime(fd, (mtime, mtime))
    except (OverflowError, OSError, ValueError):
        pass  # a time the host cannot hold: the file keeps its own


def _parts(name: str, what: str) -> List[str]:
    """The components of an entry's name, refusing what would not stay below
    the root: an absolute name or a '..'."""
    if name.startswith("/"):
        raise GvxError(0, f"archive {what} {name!r} is absolute; refused")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise GvxError(0, f"archive {what} {name!r} climbs out with '..'; refused")
    return parts


def _open_dir(root: int, parts: List[str], create: bool, name: str) -> int:
    """A descriptor of the directory root/parts, each step opened with
    O_NOFOLLOW (and made 0755 where missing, if create)."""
    fd = os.dup(root)
    try:
        for i, p in enumerate(parts):
            try:
                nfd = os.open(p, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                os.mkdir(p, 0o755, dir_fd=fd)
                nfd = os.open(p, _DIR_FLAGS, dir_fd=fd)
            except OSError as e:
                if e.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise GvxError(0, f"archive entry {name!r}: {'/'.join(parts[:i + 1])!r} is not a directory"
                                      " (a symlink or a file); refused") from None
                raise
            os.close(fd)
            fd = nfd
        return fd
    except BaseException:
        os.close(fd)
        raise


def _clear(parent: int, name: str) -> None:
    """Removes a non-directory at name, so that a new entry takes its place
    instead of writing through it."""
    try:
        st = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        raise GvxError(0, f"archive entry {name!r}: a directory is in the way")
    os.unlink(name, dir_fd=parent)


def _inside(root: int, parts: List[str], target: str) -> bool:
    """Whether the symlink root/parts, pointing at target, resolves below
    root on the tree as it is now. Resolves component by component relative
    to root (links through links too); what does not exist is taken by its
    name. Fails closed: too many hops, or a name too long to look up."""
    if target.startswith("/"):
        return False
    stack = parts[:-1]  # the link's directory, relative to root
    todo = [c for c in target.split("/") if c not in ("", ".")]
    hops = 0
    while todo:
        c = todo.pop(0)
        if c == "..":
            if not stack:
                return False
            stack.pop()
            continue
        here = "/".join(stack + [c])
        try:
            st = os.stat(here, dir_fd=root, follow_symlinks=False)
        except FileNotFoundError:
            stack.append(c)
            continue
        except OSError:
            return False
        if stat.S_ISLNK(st.st_mode):
            hops += 1
            if hops > _MAX_LINK_HOPS:
                return False
            t = os.readlink(here, dir_fd=root)
            if t.startswith("/"):
                return False
            todo = [x for x in t.split("/") if x not in ("", ".")] + todo
            continue
        stack.append(c)
    return True


def unpack(src: BinaryIO, local_dir: str, max_bytes: Optional[int] = DEFAULT_MAX_DOWNLOAD,
           skip_outside_links: bool = False) -> int:
    """Unpacks the tar stream src into local_dir (made); returns the number
    of entries written. See the module's doc for what is refused.
    skip_outside_links: leave symlinks that lead out of local_dir out
    without an error (a virtualenv's bin/python -> /usr/bin/python3, say)."""
    os.makedirs(local_dir, exist_ok=True)
    root = os.open(local_dir, _DIR_FLAGS & ~os.O_NOFOLLOW)
    links: List[Tuple[List[str], str, str]] = []
    dirs: List[Tuple[List[str], int, float, str]] = []
    n = 0
    absolute: List[Tuple[List[str], str, str]] = []  # links not made
    checked = False  # the links were checked (and the outward ones removed)
    try:
        with tarfile.open(fileobj=CappedReader(src, max_bytes, "the archive"), mode="r|", tarinfo=_TarInfo) as tf:
            for m in tf:
                if m.isdev():  # character and block devices, fifos
                    continue
                parts = _parts(m.name, "entry")
                if not parts:
                    if m.isdir():
                        continue
                    raise GvxError(0, f"archive entry {m.name!r} names the download directory itself")
                parent = _open_dir(root, parts[:-1], True, m.name)
                try:
                    name = parts[-1]
                    if m.isdir():
                        try:
                            os.mkdir(name, 0o700, dir_fd=parent)
                        except FileExistsError:
                            os.close(_open_dir(parent, [name], False, m.name))
                        dirs.append((parts, m.mode, m.mtime, m.name))
                    elif m.isreg():
                        _clear(parent, name)
                        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC, 0o600,
                                     dir_fd=parent)
                        with os.fdopen(fd, "wb") as f:
                            body = tf.extractfile(m)
                            while True:
                                b = body.read(1 << 20) if body else b""
                                if not b:
                                    break
                                f.write(b)
                            os.fchmod(f.fileno(), m.mode & 0o777)
                            f.flush()
                            _utime(f.fileno(), m.mtime)
                    elif m.issym():
                        if m.linkname.startswith("/"):  # the host's root: never made
                            absolute.append(([], m.linkname, m.name))
                            continue
                        _clear(parent, name)
                        os.symlink(m.linkname, name, dir_fd=parent)
                        links.append((parts, m.linkname, m.name))
                    elif m.islnk():
                        sparts = _parts(m.linkname, "hard link target")
                        if not sparts:
                            raise GvxError(0, f"archive hard link {m.name!r} -> {m.linkname!r} names no file")
                        sdir = _open_dir(root, sparts[:-1], False, m.linkname)
                        try:
                            st = os.stat(sparts[-1], dir_fd=sdir, follow_symlinks=False)
                            if not stat.S_ISREG(st.st_mode):
                                raise GvxError(0, f"archive hard link {m.name!r} -> {m.linkname!r}: not a regular file")
                            _clear(parent, name)
                            os.link(sparts[-1], name, src_dir_fd=sdir, dst_dir_fd=parent, follow_symlinks=False)
                        finally:
                            os.close(sdir)
                    else:
                        continue
                    n += 1
                finally:
                    os.close(parent)
        bad = absolute + _drop_outward(root, links)
        checked = True
        if bad and not skip_outside_links:
            _, t, nm = bad[0]
            more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
            raise GvxError(0, f"archive link {nm!r} -> {t!r} points outside {local_dir}{more}; removed")
        for parts, mode, mtime, name in reversed(dirs):  # children before parents
            d = _open_dir(root, parts, False, name)
            try:
                os.fchmod(d, (mode & 0o777) | 0o700)
                _utime(d, mtime)
            finally:
                os.close(d)
        return n
    except BaseException as e:
        if not checked:
            try:  # what was unpacked stays; links leading out of it do not
                _drop_outward(root, links)
            except OSError:
                pass
        if isinstance(e, (tarfile.TarError, EOFError, ValueError, OverflowError, UnicodeError)):
            raise GvxError(0, f"the archive is not a valid tar: {e}") from None
        raise
    finally:
        os.close(root)


def _drop_outward(root: int, links: List[Tuple[List[str], str, str]]) -> List[Tuple[List[str], str, str]]:
    """Removes the symlinks made that lead out of root; returns them."""
    bad = [(p, t, nm) for p, t, nm in links if not _inside(root, p, t)]
    for p, _, nm in bad:
        d = _open_dir(root, p[:-1], False, nm)
        try:
            os.unlink(p[-1], dir_fd=d)
        finally:
            os.close(d)
    return bad

