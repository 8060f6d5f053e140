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
kept). Devices and fifos are skipped. A symlink whose target leaves ``local_dir`` (an absolute target, or
one that climbs out, through other links included, resolved on the finished
tree) is not kept, and the download fails once the rest is unpacked, naming
it, so that nothing the caller later opens inside ``local_dir`` leads out of
it. Any other error stops the download and leaves what was unpacked before
it in place (minus such links).

The archive's size is the sender's too, and so is how much tarfile would
expand it: a sparse file's map (read whole while its header is parsed, and
its holes as large as the header says), a chain of extended headers each
held while the next is read, every member kept in TarFile.members. So
only plain members are read (see _KEEP: sparse files of every kind,
multi-volume and contiguous members, global pax headers are refused before
tarfile processes them), a pax header is at most 1 MiB, a name at most
4096 bytes, an archive at most max_members entries (DEFAULT_MAX_MEMBERS),
and what is remembered per entry is bounded: a directory repeated a
million times is remembered once.
"""

import errno
import os
import stat
import tarfile
from typing import BinaryIO, Dict, List, Optional, Sequence, Tuple

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


# What one archive may hold: at most max_members entries (DEFAULT_MAX_MEMBERS
# by default), each named in at most _MAX_NAME bytes (PATH_MAX: the agent
# cannot open a longer path to send it), with at most one pax header of
# _MAX_PAX bytes and _MAX_EXT_CHAIN extended headers in all before it.
# Besides its bytes (max_bytes), that bounds the work and memory a download
# costs: each entry is parsed and dropped, and only the directories (once
# each, however often they are repeated) and symlinks made are remembered,
# _MAX_KEPT bytes of them at most (_KEPT_COST per entry, plus its names).
DEFAULT_MAX_MEMBERS = 1_000_000
_MAX_NAME = 4096
_MAX_PAX = 1 << 20
_MAX_EXT_CHAIN = 4
_MAX_KEPT = 128 << 20
_KEPT_COST = 256
# Directory opens the whole download may do, per entry on average: the
# parent directory is kept open from one entry to the next, so an archive
# in tree order (the agent's) opens each directory about once; one that
# jumps between deep directories on every entry is refused.
_OPENS_PER_MEMBER = 16

# The member types kept (or, devices and fifos, skipped), and the extended
# headers read for them: pax (one entry's) and GNU long names. Everything
# else is refused before tarfile processes it: GNU sparse files (old
# style, whose maps tarfile reads whole, and pax's GNU.sparse.*: their maps
# and holes are the sender's to size), multi-volume and volume headers,
# contiguous files, global pax headers (they would apply to every entry
# after), Solaris headers, unknown types (tarfile would take them for
# regular files).
_KEEP = {tarfile.REGTYPE, tarfile.AREGTYPE, tarfile.DIRTYPE, tarfile.SYMTYPE, tarfile.LNKTYPE,
         tarfile.CHRTYPE, tarfile.BLKTYPE, tarfile.FIFOTYPE}
_EXT = {tarfile.XHDTYPE, tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK}
_TYPE_NAMES = {tarfile.GNUTYPE_SPARSE: "a GNU sparse file", tarfile.CONTTYPE: "a contiguous file",
               b"M": "a GNU multi-volume continuation", b"V": "a volume header", b"N": "an old GNU long name",
               b"D": "a GNU dump directory", tarfile.XGLTYPE: "a global pax header",
               tarfile.SOLARIS_XHDTYPE: "a Solaris extended header"}


class Refused(GvxError):
    """An archive member refused before tarfile processed it."""

    def __init__(self, msg: str):
        super().__init__(0, "archive refused: " + msg)


def _pax_records(buf: bytes) -> List[Tuple[bytes, bytes]]:
    """A pax header's "LEN KEY=VALUE\n" records, parsed strictly in one
    pass (tarfile's own parse scans with regular expressions some Python
    versions backtrack on for seconds)."""
    out = []
    pos, n = 0, len(buf)
    while pos < n:
        sp = buf.find(b" ", pos, pos + 21)
        if sp <= pos or not buf[pos:sp].isdigit():
            raise Refused(f"a pax header record at byte {pos} has no length")
        end = pos + int(buf[pos:sp])
        if end <= sp + 2 or end > n or buf[end - 1:end] != b"\n":
            raise Refused(f"a pax header record at byte {pos} has a bad length")
        key, eq, value = buf[sp + 1:end - 1].partition(b"=")
        if not eq or not key:
            raise Refused(f"a pax header record at byte {pos} has no keyword")
        out.append((key, value))
        pos = end
    return out


class _TarInfo(tarfile.TarInfo):
    """tarfile.TarInfo that refuses, before tarfile reads them, the members
    and headers it would expand in memory (see _KEEP)."""

    def _proc_member(self, tf):  # type: ignore[override]
        if self.type in _EXT:
            tf._gvx_chain += 1  # type: ignore[attr-defined]
            if tf._gvx_chain > _MAX_EXT_CHAIN:  # type: ignore[attr-defined]
                raise Refused(f"more than {_MAX_EXT_CHAIN} extended headers before one entry")
        elif self.type not in _KEEP:
            what = _TYPE_NAMES.get(self.type, f"an entry of type {self.type!r}")
            raise Refused(f"{what} ({self.name!r}) is not unpacked")
        return super()._proc_member(tf)  # type: ignore[misc]

    def _proc_gnulong(self, tf):  # type: ignore[override]
        if self.size > _MAX_NAME:
            raise Refused(f"a GNU long name of {self.size} bytes (at most {_MAX_NAME})")
        return super()._proc_gnulong(tf)  # type: ignore[misc]

    def _proc_pax(self, tf):  # type: ignore[override]
        # tarfile's own, but bounded and strict: one entry's header (types
        # checked above), at most _MAX_PAX bytes, no GNU.sparse.* keys.
        if self.size > _MAX_PAX:
            raise Refused(f"a pax header of {self.size} bytes (at most {_MAX_PAX})")
        buf = tf.fileobj.read(self._block(self.size))
        if len(buf) < self.size:
            raise tarfile.ReadError("unexpected end of data in a pax header")
        recs = _pax_records(buf[:self.size])
        binary = any(k == b"hdrcharset" and v == b"BINARY" for k, v in recs)
        headers = dict(tf.pax_headers)
        for k, v in recs:
            key = _decode(k, "utf-8", "utf-8", tf.errors)
            if key.startswith("GNU.sparse."):
                raise Refused(f"a GNU sparse file (pax keyword {key}) is not unpacked")
            enc = tf.encoding if binary and key in tarfile.PAX_NAME_FIELDS else "utf-8"
            headers[key] = _decode(v, enc, tf.encoding, tf.errors)
        try:
            nxt = self.fromtarfile(tf)
        except tarfile.HeaderError as e:
            raise tarfile.SubsequentHeaderError(str(e)) from None
        nxt._apply_pax_info(headers, tf.encoding, tf.errors)
        nxt.offset = self.offset
        if "size" in headers:
            offset = nxt.offset_data
            if nxt.isreg():
                offset += nxt._block(nxt.size)
            tf.offset = offset
        return nxt

    def _proc_sparse(self, tf):  # type: ignore[override]  # refused in _proc_member already
        raise Refused("a GNU sparse file is not unpacked")


def _decode(b: bytes, enc: str, fallback: str, errors: str) -> str:
    try:
        return b.decode(enc, "strict")
    except UnicodeDecodeError:
        return b.decode(fallback, errors)


class _TarFile(tarfile.TarFile):
    """A stream reader that keeps nothing of the members it hands out
    (tarfile keeps every TarInfo it read, in members) and bounds the
    extended headers before each (see _TarInfo)."""

    def __init__(self, *a, **kw):  # type: ignore[no-untyped-def]
        self._gvx_chain = 0
        super().__init__(*a, **kw)

    def next(self):  # type: ignore[override]
        self._gvx_chain = 0
        m = super().next()
        self.members.clear()
        return m


class _Walker:
    """Descriptors of the directories on the way to the last one asked for,
    kept open: the next entry in the same directory (or below it) opens
    only what differs. Every directory is opened with O_NOFOLLOW from the
    one before it (made 0755 where missing, if create); a directory this
    download opened stays one (an entry never replaces a directory)."""

    def __init__(self, root: int, budget: int):
        self.root = root
        self.names: List[str] = []
        self.fds: List[int] = []
        self.opens = 0
        self.budget = budget

    def at(self, parts: List[str], create: bool, name: str) -> int:
        """The descriptor of root/parts (the walker's: do not close it)."""
        k = 0
        while k < len(parts) and k < len(self.names) and parts[k] == self.names[k]:
            k += 1
        self._drop(k)
        for i in range(k, len(parts)):
            self.opens += 1
            if self.opens > self.budget:
                raise Refused(f"entry {name!r}: the archive's entries jump between deep directories "
                              f"(more than {self.budget} directory opens)")
            fd = _open_dir(self.fds[-1] if self.fds else self.root, [parts[i]], create, name, parts[:i])
            self.names.append(parts[i])
            self.fds.append(fd)
        return self.fds[-1] if self.fds else self.root

    def _drop(self, k: int) -> None:
        while len(self.fds) > k:
            os.close(self.fds.pop())
            self.names.pop()

    def close(self) -> None:
        self._drop(0)


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


def _open_dir(root: int, parts: List[str], create: bool, name: str, prefix: Sequence[str] = ()) -> int:
    """A descriptor of the directory root/parts, each step opened with
    O_NOFOLLOW (and made 0755 where missing, if create); prefix: the path
    of root below the download directory, for errors."""
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
                    raise GvxError(0, f"archive entry {name!r}: {'/'.join([*prefix, *parts[:i + 1]])!r} is not a directory"
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
           skip_outside_links: bool = False, max_members: Optional[int] = DEFAULT_MAX_MEMBERS) -> int:
    """Unpacks the tar stream src into local_dir (made); returns the number
    of entries written. See the module's doc for what is refused.
    skip_outside_links: leave symlinks that lead out of local_dir out
    without an error (a virtualenv's bin/python -> /usr/bin/python3, say).
    max_members: the most entries the archive may have (None: no cap)."""
    os.makedirs(local_dir, exist_ok=True)
    root = os.open(local_dir, _DIR_FLAGS & ~os.O_NOFOLLOW)
    links: List[Tuple[str, str, str]] = []  # (path below root, target, entry name)
    dirs: Dict[str, Tuple[int, float, str]] = {}  # path below root: (mode, mtime, entry name)
    absolute: List[Tuple[str, str, str]] = []  # links not made (the first of them)
    nabsolute = 0
    kept = 0  # bytes of links and dirs remembered (as _KEPT_COST each, plus names)
    n = seen = 0
    walk = _Walker(root, 4096)
    checked = False  # the links were checked (and the outward ones removed)

    def keep(*names: str) -> None:
        nonlocal kept
        kept += _KEPT_COST + sum(len(x) for x in names)
        if kept > _MAX_KEPT:
            raise Refused(f"more directories and links than {_MAX_KEPT >> 20} MiB of names to remember")

    try:
        with _TarFile.open(fileobj=CappedReader(src, max_bytes, "the archive"), mode="r|", tarinfo=_TarInfo) as tf:
            while True:
                m = tf.next()
                if m is None:
                    break
                seen += 1
                walk.budget = _OPENS_PER_MEMBER * seen + 4096
                if max_members is not None and seen > max_members:
                    raise Refused(f"more than max_members={max_members} entries; pass a larger max_members "
                                  "to unpack it")
                if len(m.name) > _MAX_NAME or len(m.linkname) > _MAX_NAME:
                    raise Refused(f"entry {m.name[:200]!r}…: a name longer than {_MAX_NAME} bytes")
                if m.isdev():  # character and block devices, fifos
                    continue
                parts = _parts(m.name, "entry")
                if not parts:
                    if m.isdir():
                        continue
                    raise GvxError(0, f"archive entry {m.name!r} names the download directory itself")
                path = "/".join(parts)
                name = parts[-1]
                if m.isdir() and path in dirs:  # made or checked already: it is still a directory
                    dirs[path] = (m.mode, m.mtime, dirs[path][2])
                    n += 1
                    continue
                parent = walk.at(parts[:-1], True, m.name)
                if m.isdir():
                    try:
                        os.mkdir(name, 0o700, dir_fd=parent)
                    except FileExistsError:
                        os.close(_open_dir(parent, [name], False, m.name, parts[:-1]))
                    keep(path, m.name)
                    dirs[path] = (m.mode, m.mtime, m.name)
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
                        if not absolute:  # the first names them all
                            absolute.append((path, m.linkname, m.name))
                        nabsolute += 1
                        continue
                    _clear(parent, name)
                    os.symlink(m.linkname, name, dir_fd=parent)
                    keep(path, m.linkname, m.name)
                    links.append((path, m.linkname, m.name))
                elif m.islnk():
                    sparts = _parts(m.linkname, "hard link target")
                    if not sparts:
                        raise GvxError(0, f"archive hard link {m.name!r} -> {m.linkname!r} names no file")
                    walk.opens += len(sparts)
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
        walk.close()
        bad = absolute + _drop_outward(root, links)
        nbad = nabsolute + len(bad) - len(absolute)
        checked = True
        if bad and not skip_outside_links:
            _, t, nm = bad[0]
            more = f" (and {nbad - 1} more)" if nbad > 1 else ""
            raise GvxError(0, f"archive link {nm!r} -> {t!r} points outside {local_dir}{more}; removed")
        walk = _Walker(root, _OPENS_PER_MEMBER * seen + 4096)
        for path in sorted(dirs, reverse=True):  # children before parents, a subtree at a time
            mode, mtime, name = dirs[path]
            d = walk.at(path.split("/"), False, name)
            os.fchmod(d, (mode & 0o777) | 0o700)
            _utime(d, mtime)
        return n
    except BaseException as e:
        if not checked:
            try:  # what was unpacked stays; links leading out of it do not
                _drop_outward(root, links)
            except OSError:
                pass
        if isinstance(e, (tarfile.TarError, EOFError, ValueError, OverflowError, UnicodeError, RecursionError)):
            raise GvxError(0, f"the archive is not a valid tar: {e}") from None
        raise
    finally:
        walk.close()
        os.close(root)


def _drop_outward(root: int, links: List[Tuple[str, str, str]]) -> List[Tuple[str, str, str]]:
    """Removes the symlinks made that lead out of root; returns them."""
    bad = [(p, t, nm) for p, t, nm in links if not _inside(root, p.split("/"), t)]
    for p, _, nm in bad:
        parts = p.split("/")
        d = _open_dir(root, parts[:-1], False, nm)
        try:
            os.unlink(parts[-1], dir_fd=d)
        finally:
            os.close(d)
    return bad
