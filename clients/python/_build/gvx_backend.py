"""The in-tree PEP 517 / PEP 660 build backend of the gvx Python client.

Standard library only, Python >= 3.9, so that ``pip install ./clients/python``
(and ``pip install -e``) works offline on a stock Python: there is nothing to
fetch from an index (``[build-system] requires = []``), with or without
``--no-build-isolation``. It is not part of the installed package: pip finds
it through ``backend-path`` in pyproject.toml.

The metadata comes from pyproject.toml's ``[project]`` table (read with
tomllib where it exists, Python >= 3.11, else with the small reader below,
which takes the subset this file uses); the version is ``__version__`` in
``gvx/__init__.py``, its one place (``dynamic = ["version"]``).

Hooks: build_wheel, build_sdist, build_editable, get_requires_for_build_*,
prepare_metadata_for_build_wheel / _editable.
"""

import ast
import base64
import csv
import gzip
import hashlib
import io
import json
import os
import re
import tarfile
import tempfile
import time
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GENERATOR = "gvx_backend (in-tree, clients/python/_build/gvx_backend.py)"

# [project] keys this backend turns into metadata. Any other key is an
# error rather than metadata silently left out.
_KNOWN = {"name", "dynamic", "description", "readme", "requires-python", "license",
          "dependencies", "classifiers", "keywords"}

_VERSION_RE = re.compile(r"^(0|[1-9][0-9]*)(\.(0|[1-9][0-9]*))*((a|b|rc)(0|[1-9][0-9]*))?"
                         r"(\.post(0|[1-9][0-9]*))?(\.dev(0|[1-9][0-9]*))?$")
_NAME_RE = re.compile(r"^([A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9._-]*[A-Za-z0-9])$")


class BackendError(Exception):
    """pyproject.toml or the source tree is not what this backend can build."""


# --- pyproject.toml -----------------------------------------------------------

def _fallback_toml_table(text, want="project"):
    """One top-level table of a pyproject.toml (by default [project]), for
    Pythons without tomllib.

    It reads what this project's file uses: ``key = value`` lines where a
    value is a basic ("...") or literal ('...') string, true/false, an
    integer, or a one-line array or inline table of those; comments; other
    tables are skipped. Anything else inside the table is an error naming
    the line (never a guess)."""
    project = None
    table = None
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            m = re.match(r"^\[\[?([^\]]+)\]\]?\s*(#.*)?$", line)
            if not m:
                if table == want:
                    raise BackendError(f"pyproject.toml line {lineno}: {raw!r}: not a table header")
                continue  # a line of a multi-line value in a table that is not ours
            table = re.sub(r"[\s\"']", "", m.group(1))
            if line.startswith("[[") and table == want:
                raise BackendError(f"pyproject.toml line {lineno}: [{want}] must be a table")
            if table == want:
                if project is not None:
                    raise BackendError(f"pyproject.toml line {lineno}: [{want}] appears twice")
                project = {}
            elif table is not None and table.startswith(want + "."):
                raise BackendError(
                    f"pyproject.toml line {lineno}: {line!r}: the fallback TOML reader of "
                    f"_build/gvx_backend.py (used without tomllib, Python < 3.11) does not read "
                    f"sub-tables of [{want}]; write it as an inline table on one line")
            continue
        if table != want:
            continue
        m = re.match(r"^([A-Za-z0-9_-]+)\s*=\s*", line)
        if not m:
            raise BackendError(f"pyproject.toml line {lineno}: {raw!r}: expected key = value "
                               "(the fallback TOML reader takes bare keys only)")
        key = m.group(1)
        try:
            value, end = _toml_value(line, m.end())
            end = _skip_ws(line, end)
            if end < len(line) and line[end] != "#":
                raise ValueError(f"unexpected {line[end:]!r} after the value")
        except ValueError as e:
            raise BackendError(
                f"pyproject.toml line {lineno}: {raw!r}: {e} (the fallback TOML reader of "
                "_build/gvx_backend.py, used without tomllib, takes one-line strings, "
                "booleans, integers, arrays and inline tables)") from None
        if key in project:
            raise BackendError(f"pyproject.toml line {lineno}: [{want}] key {key!r} set twice")
        project[key] = value
    if project is None:
        raise BackendError(f"pyproject.toml has no [{want}] table")
    return project


def _skip_ws(s, i):
    while i < len(s) and s[i] in " \t":
        i += 1
    return i


def _toml_value(s, i):
    i = _skip_ws(s, i)
    if i >= len(s):
        raise ValueError("missing value")
    c = s[i]
    if s.startswith('"""', i) or s.startswith("'''", i):
        raise ValueError("multi-line strings are not supported")
    if c == '"':
        j = i + 1
        while j < len(s) and s[j] != '"':
            j += 2 if s[j] == "\\" else 1
        if j >= len(s):
            raise ValueError("unterminated string")
        body = s[i + 1:j]
        body = re.sub(r"\\U([0-9A-Fa-f]{8})", lambda m: chr(int(m.group(1), 16)), body)
        return json.loads('"' + body + '"'), j + 1
    if c == "'":
        j = s.find("'", i + 1)
        if j < 0:
            raise ValueError("unterminated string")
        return s[i + 1:j], j + 1
    if c == "[":
        out = []
        i = _skip_ws(s, i + 1)
        while True:
            if i >= len(s):
                raise ValueError("unterminated array (arrays must fit on one line)")
            if s[i] == "]":
                return out, i + 1
            v, i = _toml_value(s, i)
            out.append(v)
            i = _skip_ws(s, i)
            if i < len(s) and s[i] == ",":
                i = _skip_ws(s, i + 1)
            elif i < len(s) and s[i] != "]":
                raise ValueError(f"expected , or ] in array at {s[i:]!r}")
    if c == "{":
        out = {}
        i = _skip_ws(s, i + 1)
        if i < len(s) and s[i] == "}":
            return out, i + 1
        while True:
            m = re.compile(r"([A-Za-z0-9_-]+)\s*=\s*").match(s, i)
            if not m:
                raise ValueError(f"expected key = value in inline table at {s[i:]!r}")
            v, i = _toml_value(s, m.end())
            if m.group(1) in out:
                raise ValueError(f"key {m.group(1)!r} set twice in inline table")
            out[m.group(1)] = v
            i = _skip_ws(s, i)
            if i < len(s) and s[i] == ",":
                i = _skip_ws(s, i + 1)
            elif i < len(s) and s[i] == "}":
                return out, i + 1
            else:
                raise ValueError("unterminated inline table (it must fit on one line)")
    m = re.compile(r"true|false|[+-]?[0-9]+(?![0-9A-Za-z_.:-])").match(s, i)
    if m:
        t = m.group(0)
        return (t == "true") if t in ("true", "false") else int(t), m.end()
    raise ValueError(f"unsupported value at {s[i:]!r}")


def _read_pyproject(root):
    path = os.path.join(root, "pyproject.toml")
    with open(path, "rb") as f:
        data = f.read()
    try:
        import tomllib
    except ImportError:
        try:
            return {"project": _fallback_toml_table(data.decode("utf-8"), "project")}
        except UnicodeDecodeError as e:
            raise BackendError(f"{path}: {e}") from None
    try:
        return tomllib.loads(data.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise BackendError(f"{path}: {e}") from None


def _version_of(root, package):
    path = os.path.join(root, package, "__init__.py")
    try:
        with open(path, "rb") as f:
            tree = ast.parse(f.read(), path)
    except (OSError, SyntaxError) as e:
        raise BackendError(f"{path}: {e}: the version is read from its __version__") from None
    found = None
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id == "__version__"):
            if not (isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
                raise BackendError(f"{path} line {node.lineno}: __version__ must be a string literal")
            found = node.value.value
    if found is None:
        raise BackendError(f"{path}: no __version__ = \"...\" (the package's version lives there)")
    if not _VERSION_RE.match(found):
        raise BackendError(f"{path}: __version__ = {found!r} is not a normalized version "
                           "(like 1.2.3, 1.2.3rc1, 1.2.3.post1, 1.2.3.dev1)")
    return found


class Project:
    """What the wheel and sdist are made from."""

    def __init__(self, root=ROOT):
        self.root = root
        proj = _read_pyproject(root).get("project")
        if not isinstance(proj, dict):
            raise BackendError(f"{root}/pyproject.toml: no [project] table")
        unknown = sorted(set(proj) - _KNOWN - {"version"})
        if unknown:
            raise BackendError(
                f"{root}/pyproject.toml: [project] keys {unknown} are not turned into metadata "
                "by the in-tree backend; add them to _build/gvx_backend.py or remove them")
        dynamic = proj.get("dynamic", [])
        if not isinstance(dynamic, list):
            raise BackendError(f"{root}/pyproject.toml: [project] dynamic must be an array")
        if "version" in proj or "version" not in dynamic:
            raise BackendError(
                f"{root}/pyproject.toml: the version lives in the package's __init__.py "
                "(__version__): [project] must say dynamic = [\"version\"] and set no version")
        extra = sorted(set(map(str, dynamic)) - {"version"})
        if extra:
            raise BackendError(f"{root}/pyproject.toml: only the version can be dynamic, not {extra}")
        name = proj.get("name")
        if not isinstance(name, str) or not _NAME_RE.match(name):
            raise BackendError(f"{root}/pyproject.toml: [project] name {name!r} is not a valid name")
        self.name = name
        self.norm = re.sub(r"[-_.]+", "_", name).lower()  # dist-info / wheel / sdist form
        self.package = self.norm
        if not os.path.isfile(os.path.join(root, self.package, "__init__.py")):
            raise BackendError(f"{root}: no package directory {self.package}/ with an __init__.py")
        self.version = _version_of(root, self.package)
        self.proj = proj

    def _str(self, key):
        v = self.proj.get(key)
        if v is not None and not isinstance(v, str):
            raise BackendError(f"{self.root}/pyproject.toml: [project] {key} must be a string")
        return v

    def _strs(self, key):
        v = self.proj.get(key, [])
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise BackendError(f"{self.root}/pyproject.toml: [project] {key} must be an array of strings")
        return v

    def metadata(self):
        """The METADATA (PKG-INFO) file, core metadata 2.1, as bytes."""
        lines = [("Metadata-Version", "2.1"), ("Name", self.name), ("Version", self.version)]
        desc = self._str("description")
        if desc is not None:
            if "\n" in desc:
                raise BackendError(f"{self.root}/pyproject.toml: [project] description must be one line")
            lines.append(("Summary", desc))
        if self._strs("keywords"):
            lines.append(("Keywords", ",".join(self._strs("keywords"))))
        lic = self.proj.get("license")
        if isinstance(lic, dict) and set(lic) == {"text"} and isinstance(lic["text"], str):
            lines.append(("License", lic["text"]))
        elif isinstance(lic, str):
            lines.append(("License", lic))
        elif lic is not None:
            raise BackendError(f"{self.root}/pyproject.toml: [project] license must be "
                               "a string or { text = \"...\" } for the in-tree backend")
        for c in self._strs("classifiers"):
            lines.append(("Classifier", c))
        rp = self._str("requires-python")
        if rp is not None:
            lines.append(("Requires-Python", rp))
        for d in self._strs("dependencies"):
            lines.append(("Requires-Dist", d))
        body = ""
        readme = self._str("readme")
        if readme is not None:
            if os.path.isabs(readme) or os.path.normpath(readme).split(os.sep)[0] == "..":
                raise BackendError(f"{self.root}/pyproject.toml: [project] readme {readme!r} "
                                   "must be a file in the source tree")
            path = os.path.join(self.root, readme)
            try:
                with open(path, encoding="utf-8") as f:
                    body = f.read()
            except (OSError, UnicodeDecodeError) as e:
                raise BackendError(f"[project] readme {readme!r}: {e}") from None
            ext = os.path.splitext(readme)[1].lower()
            ctype = {".md": "text/markdown", ".rst": "text/x-rst"}.get(ext, "text/plain")
            lines.append(("Description-Content-Type", ctype + "; charset=UTF-8"))
        for k, v in lines:
            if "\n" in v or "\r" in v:
                raise BackendError(f"metadata field {k}: {v!r} has a line break")
        out = "".join(f"{k}: {v}\n" for k, v in lines)
        if body:
            out += "\n" + body
        return out.encode("utf-8")

    def wheel_file(self):
        return (f"Wheel-Version: 1.0\nGenerator: {GENERATOR}\n"
                "Root-Is-Purelib: true\nTag: py3-none-any\n").encode("utf-8")

    @property
    def dist_info(self):
        return f"{self.norm}-{self.version}.dist-info"

    @property
    def wheel_name(self):
        return f"{self.norm}-{self.version}-py3-none-any.whl"

    def package_files(self):
        """(path in the archive, path on disk) of the package's files, sorted."""
        return self._tree(self.package)

    def _tree(self, top):
        out = []
        base = os.path.join(self.root, top)
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not d.startswith("."))
            for fn in sorted(filenames):
                if fn.endswith((".pyc", ".pyo")) or fn.startswith("."):
                    continue
                full = os.path.join(dirpath, fn)
                if os.path.islink(full) or not os.path.isfile(full):
                    raise BackendError(f"{full}: not a regular file; the package ships plain files only")
                rel = os.path.relpath(full, self.root).replace(os.sep, "/")
                out.append((rel, full))
        return out


# --- archives -----------------------------------------------------------------

def _epoch():
    """SOURCE_DATE_EPOCH if set (reproducible builds), else 1980-01-01."""
    try:
        t = int(os.environ.get("SOURCE_DATE_EPOCH", ""))
    except ValueError:
        t = 0
    return max(t, 315532800)


def _record_hash(data):
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def _write_wheel(directory, name, dist_info, files):
    """Write the wheel `name` into `directory` from files, a list of
    (archive path, bytes), adding dist_info/RECORD; atomically (a temp file
    renamed)."""
    record_path = dist_info + "/RECORD"
    rec = io.StringIO()
    w = csv.writer(rec, lineterminator="\n")
    for arc, data in files:
        w.writerow([arc, _record_hash(data), str(len(data))])
    w.writerow([record_path, "", ""])
    files = files + [(record_path, rec.getvalue().encode("utf-8"))]
    date_time = time.gmtime(_epoch())[:6]
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".whl", dir=directory)
    try:
        with os.fdopen(fd, "wb") as raw, zipfile.ZipFile(raw, "w", zipfile.ZIP_DEFLATED) as zf:
            for arc, data in files:
                zi = zipfile.ZipInfo(arc, date_time)
                zi.external_attr = (0o100644 & 0xFFFF) << 16
                zi.compress_type = zipfile.ZIP_DEFLATED
                zf.writestr(zi, data)
        os.replace(tmp, os.path.join(directory, name))
    except BaseException:
        os.unlink(tmp)
        raise
    return name


def _read(path):
    with open(path, "rb") as f:
        return f.read()


# --- PEP 517 hooks ------------------------------------------------------------

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    p = Project()
    d = os.path.join(metadata_directory, p.dist_info)
    os.makedirs(d, exist_ok=True)
    for fn, data in (("METADATA", p.metadata()), ("WHEEL", p.wheel_file())):
        with open(os.path.join(d, fn), "wb") as f:
            f.write(data)
    return p.dist_info


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    p = Project()
    files = [(arc, _read(full)) for arc, full in p.package_files()]
    files += [(p.dist_info + "/METADATA", p.metadata()), (p.dist_info + "/WHEEL", p.wheel_file())]
    return _write_wheel(wheel_directory, p.wheel_name, p.dist_info, files)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """PEP 660: a wheel whose only code is a .pth file naming the source
    directory, so the installed package is the files being edited."""
    p = Project()
    root = os.path.abspath(p.root)
    if "\n" in root or "\r" in root or root.startswith(("import ", "import\t")):
        raise BackendError(f"{root}: a source directory with this name cannot go in a .pth file")
    files = [(f"__editable__.{p.norm}-{p.version}.pth", (root + "\n").encode("utf-8")),
             (p.dist_info + "/METADATA", p.metadata()), (p.dist_info + "/WHEEL", p.wheel_file())]
    return _write_wheel(wheel_directory, p.wheel_name, p.dist_info, files)


def build_sdist(sdist_directory, config_settings=None):
    """A .tar.gz with PKG-INFO, pyproject.toml, the readme, the package, this
    backend and the tests, under {name}-{version}/ (pax, owners and times
    normalized, so the same tree gives the same bytes)."""
    p = Project()
    top = f"{p.norm}-{p.version}"
    members = [("PKG-INFO", p.metadata()), ("pyproject.toml", _read(os.path.join(p.root, "pyproject.toml")))]
    readme = p.proj.get("readme")
    if isinstance(readme, str):
        members.append((readme.replace(os.sep, "/"), _read(os.path.join(p.root, readme))))
    for sub in (p.package, "_build", "tests"):
        if os.path.isdir(os.path.join(p.root, sub)):
            members += [(arc, _read(full)) for arc, full in p._tree(sub)]
    mtime = _epoch()
    name = top + ".tar.gz"
    os.makedirs(sdist_directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".tar.gz", dir=sdist_directory)
    try:
        with os.fdopen(fd, "wb") as raw, \
                gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=mtime) as gz, \
                tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tf:
            tf.addfile(_tarinfo(top, tarfile.DIRTYPE, 0o755, mtime))
            dirs = set()
            for arc, data in members:
                parts = arc.split("/")[:-1]
                for i in range(1, len(parts) + 1):
                    d = "/".join(parts[:i])
                    if d not in dirs:
                        dirs.add(d)
                        tf.addfile(_tarinfo(f"{top}/{d}", tarfile.DIRTYPE, 0o755, mtime))
                ti = _tarinfo(f"{top}/{arc}", tarfile.REGTYPE, 0o644, mtime)
                ti.size = len(data)
                tf.addfile(ti, io.BytesIO(data))
        os.replace(tmp, os.path.join(sdist_directory, name))
    except BaseException:
        os.unlink(tmp)
        raise
    return name


def _tarinfo(name, kind, mode, mtime):
    ti = tarfile.TarInfo(name)
    ti.type = kind
    ti.mode = mode
    ti.mtime = mtime
    ti.uid = ti.gid = 0
    ti.uname = ti.gname = ""
    return ti
