"""The client installs offline: pyproject.toml names an in-tree build backend
that needs nothing from an index. These tests drive that backend the way pip
does (PEP 517 hooks in a subprocess, cwd = the source tree, backend-path first
on sys.path), check the wheel and sdist it makes byte by byte against their
RECORD and the source, and then let the pip of a fresh virtualenv install the
tree with --no-index (plain, --no-build-isolation, and -e) and import gvx
from where it landed. No server needed."""

import base64
import csv
import email.parser
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import unittest
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)  # clients/python

try:
    import tomllib
except ImportError:  # Python < 3.11
    tomllib = None


def source_version():
    """__version__ from gvx/__init__.py, read as text (the one place it is)."""
    with open(os.path.join(ROOT, "gvx", "__init__.py"), encoding="utf-8") as f:
        m = re.search(r'^__version__ = "([^"]+)"$', f.read(), re.M)
    assert m, "gvx/__init__.py has no __version__"
    return m.group(1)


def backend_module():
    """The backend as a module of this process (for its TOML reader)."""
    sys.path.insert(0, os.path.join(ROOT, "_build"))
    try:
        import gvx_backend
    finally:
        sys.path.pop(0)
    return gvx_backend


def pyproject_table(name, root=ROOT):
    path = os.path.join(root, "pyproject.toml")
    if tomllib is not None:
        with open(path, "rb") as f:
            return tomllib.load(f).get(name, {})
    with open(path, encoding="utf-8") as f:
        return backend_module()._fallback_toml_table(f.read(), name)


_FRONTEND = r"""
import importlib, json, os, sys
backend, backend_path, hook, args = json.loads(sys.argv[1])
sys.path[:0] = [os.path.abspath(p) for p in backend_path]
mod = importlib.import_module(backend)
f = os.path.abspath(mod.__file__)
if not any(f.startswith(os.path.abspath(p) + os.sep) for p in backend_path):
    sys.exit("backend %s loaded from %s, outside backend-path %s" % (backend, f, backend_path))
print(json.dumps(getattr(mod, hook)(*args)))
"""


def hook(name, *args, root=ROOT):
    """Call a PEP 517 hook as a frontend does: in a fresh interpreter whose
    cwd is the source tree, with backend-path first on sys.path."""
    bs = pyproject_table("build-system", root)
    req = json.dumps([bs.get("build-backend"), bs.get("backend-path", []), name, list(args)])
    r = subprocess.run([sys.executable, "-c", _FRONTEND, req], cwd=root, capture_output=True,
                       text=True, env=clean_env())
    if r.returncode != 0:
        raise AssertionError(f"hook {name} in {root}: exit {r.returncode}\n{r.stdout}{r.stderr}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def clean_env():
    """The environment without anything that would point Python or pip
    elsewhere: no PYTHONPATH, no pip configuration, no index."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PIP_"))}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1",
               PYTHONDONTWRITEBYTECODE="1")
    return env


def package_sources():
    """The package's files in the source tree, as wheel paths."""
    out = set()
    for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, "gvx")):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for fn in filenames:
            if not fn.endswith(".pyc"):
                out.add(os.path.relpath(os.path.join(dirpath, fn), ROOT).replace(os.sep, "/"))
    return out


def tree_snapshot(root):
    """Every file under root but byte code, with its size: what a build may not change."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for fn in filenames:
            p = os.path.join(dirpath, fn)
            out[os.path.relpath(p, root)] = os.path.getsize(p)
    return out


def check_wheel(tc, path, version):
    """The wheel at path is a correct py3-none-any wheel of gvx `version`:
    every member is in RECORD once with its sha256 (urlsafe base64, no
    padding) and size; METADATA and WHEEL say what they must. Returns
    {member: bytes}."""
    tc.assertEqual(os.path.basename(path), f"gvx-{version}-py3-none-any.whl")
    di = f"gvx-{version}.dist-info"
    with zipfile.ZipFile(path) as zf:
        tc.assertIsNone(zf.testzip())
        names = zf.namelist()
        tc.assertEqual(len(names), len(set(names)), "duplicate members")
        files = {n: zf.read(n) for n in names}
    rows = list(csv.reader(io.StringIO(files[di + "/RECORD"].decode("utf-8"))))
    recorded = {}
    for row in rows:
        tc.assertEqual(len(row), 3, row)
        tc.assertNotIn(row[0], recorded, "listed twice in RECORD")
        recorded[row[0]] = row
    tc.assertEqual(set(recorded), set(files), "RECORD and the archive list different files")
    tc.assertEqual(recorded[di + "/RECORD"], [di + "/RECORD", "", ""])
    for name, data in files.items():
        if name == di + "/RECORD":
            continue
        algo, _, digest = recorded[name][1].partition("=")
        tc.assertEqual(algo, "sha256", name)
        tc.assertNotIn("=", digest, f"{name}: the hash keeps its base64 padding")
        want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        tc.assertEqual(digest, want, f"{name}: RECORD hash does not match the member")
        tc.assertEqual(recorded[name][2], str(len(data)), f"{name}: RECORD size")
    meta = email.parser.BytesParser().parsebytes(files[di + "/METADATA"])
    tc.assertIn(meta["Metadata-Version"], ("2.1", "2.2", "2.3", "2.4"))
    project = pyproject_table("project")
    tc.assertEqual(meta["Name"], project["name"])
    tc.assertEqual(meta["Version"], version)
    tc.assertEqual(meta["Requires-Python"], project["requires-python"])
    tc.assertEqual(meta["Summary"], project["description"])
    tc.assertEqual(meta.get_all("Requires-Dist") or [], project.get("dependencies", []))
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        tc.assertEqual(files[di + "/METADATA"].decode("utf-8").split("\n\n", 1)[1], f.read(),
                       "the long description is the README")
    wheel = email.parser.BytesParser().parsebytes(files[di + "/WHEEL"])
    tc.assertEqual(wheel["Wheel-Version"], "1.0")
    tc.assertTrue(wheel["Generator"])
    tc.assertEqual(wheel["Root-Is-Purelib"], "true")
    tc.assertEqual(wheel.get_all("Tag"), ["py3-none-any"])
    return files


class BackendTest(unittest.TestCase):
    def setUp(self):
        self.version = source_version()
        self.out = tempfile.mkdtemp(prefix="gvx-build-")
        self.addCleanup(shutil.rmtree, self.out)

    def test_build_system_needs_nothing(self):
        bs = pyproject_table("build-system")
        self.assertEqual(bs.get("requires"), [], "a build requirement must come from an index")
        self.assertTrue(bs.get("build-backend"))
        for p in bs.get("backend-path", []):
            self.assertTrue(os.path.isdir(os.path.join(ROOT, p)), p)
        for h in ("get_requires_for_build_wheel", "get_requires_for_build_sdist",
                  "get_requires_for_build_editable"):
            self.assertEqual(hook(h), [], h)

    def test_wheel(self):
        before = tree_snapshot(ROOT)
        name = hook("build_wheel", self.out)
        files = check_wheel(self, os.path.join(self.out, name), self.version)
        di = f"gvx-{self.version}.dist-info"
        self.assertEqual(set(files), package_sources() | {di + "/METADATA", di + "/WHEEL", di + "/RECORD"},
                         "the wheel holds the package and its metadata, nothing else (no tests, no backend)")
        for n in package_sources():
            with open(os.path.join(ROOT, n), "rb") as f:
                self.assertEqual(files[n], f.read(), n)
        self.assertEqual(tree_snapshot(ROOT), before, "building wrote into the source tree")

        # prepare_metadata_for_build_wheel says what the wheel will say.
        md = tempfile.mkdtemp(dir=self.out)
        self.assertEqual(hook("prepare_metadata_for_build_wheel", md), di)
        for fn in ("METADATA", "WHEEL"):
            with open(os.path.join(md, di, fn), "rb") as f:
                self.assertEqual(f.read(), files[f"{di}/{fn}"], fn)

    def test_editable_wheel(self):
        name = hook("build_editable", self.out)
        files = check_wheel(self, os.path.join(self.out, name), self.version)
        pth = [n for n in files if n.endswith(".pth")]
        self.assertEqual(len(pth), 1, sorted(files))
        self.assertNotIn("/", pth[0])
        self.assertEqual(files[pth[0]].decode().strip(), ROOT)
        self.assertFalse([n for n in files if n.startswith("gvx/")], "an editable wheel copies no code")

    def test_sdist(self):
        name = hook("build_sdist", self.out)
        top = f"gvx-{self.version}"
        self.assertEqual(name, top + ".tar.gz")
        with tarfile.open(os.path.join(self.out, name), "r:gz") as tf:
            members = tf.getmembers()
            for m in members:
                self.assertTrue(m.name == top or m.name.startswith(top + "/"), m.name)
                self.assertTrue(m.isfile() or m.isdir(), m.name)
                self.assertNotIn("..", m.name.split("/"), m.name)
            names = {m.name[len(top) + 1:] for m in members if m.isfile()}
            for want in ("PKG-INFO", "pyproject.toml", "README.md"):
                self.assertIn(want, names)
            self.assertLessEqual(package_sources(), names, "the sdist lacks package files")
            bs = pyproject_table("build-system")
            mod = bs["build-backend"].replace(".", "/") + ".py"
            self.assertTrue(any(os.path.join(p, mod).replace(os.sep, "/") in names
                                for p in bs["backend-path"]), "the sdist lacks the build backend")
            pkg_info = tf.extractfile(top + "/PKG-INFO").read()
            unpacked = os.path.join(self.out, "src")
            os.mkdir(unpacked)
            for m in members:  # checked above: plain files and dirs under top/
                if m.isdir():
                    os.makedirs(os.path.join(unpacked, m.name), exist_ok=True)
                else:
                    with open(os.path.join(unpacked, m.name), "wb") as f:
                        f.write(tf.extractfile(m).read())
        # The sdist builds on its own into the same wheel contents.
        whl_dir = os.path.join(self.out, "whl")
        src = os.path.join(unpacked, top)
        files = check_wheel(self, os.path.join(whl_dir, hook("build_wheel", whl_dir, root=src)), self.version)
        self.assertEqual(files[f"gvx-{self.version}.dist-info/METADATA"], pkg_info)
        for n in package_sources():
            with open(os.path.join(ROOT, n), "rb") as f:
                self.assertEqual(files[n], f.read(), n)

    def test_bad_version_is_a_clear_error(self):
        src = os.path.join(self.out, "src")
        shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns("__pycache__"))
        init = os.path.join(src, "gvx", "__init__.py")
        with open(init, encoding="utf-8") as f:
            text = f.read()
        with open(init, "w", encoding="utf-8") as f:
            f.write(text.replace(f'__version__ = "{self.version}"', '__version__ = "1.0 banana"'))
        with self.assertRaises(AssertionError) as cm:
            hook("build_wheel", self.out, root=src)
        self.assertIn("__version__ = '1.0 banana' is not a normalized version", str(cm.exception))
        self.assertIn(init, str(cm.exception))
        self.assertFalse([n for n in os.listdir(self.out) if n != "src"], "a failed build left files")

    @unittest.skipIf(tomllib is None, "no tomllib (Python < 3.11) to compare the fallback reader with")
    def test_fallback_toml_reader_agrees_with_tomllib(self):
        read = backend_module()._fallback_toml_table
        with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
            text = f.read()
        for table in ("project", "build-system"):
            self.assertEqual(read(text, table), tomllib.loads(text)[table], table)
        text = (
            "# top\n[tool.other]\nx = [\n  [1, 2],\n]\n"
            "[project] # the one\n"
            'name = "a\\"b\\\\c\\u00e9\\U0001F600"  # comment with "quotes"\n'
            "description = 'literal \\n # not a comment'\n"
            'license = { text = "MIT", x = [true, false, -3] }\n'
            'keywords = [ "a", \'b\', ]\n'
            "empty = []\n"
            "[tool.after]\nname = 'other'\n")
        self.assertEqual(read(text), tomllib.loads(text)["project"])
        BackendError = backend_module().BackendError
        for bad, why in (('[project]\ndeps = [\n  "x",\n]\n', "line 2"),
                         ('[project]\nd = """x"""\n', "multi-line strings"),
                         ('[project]\nd = "x" y\n', "unexpected"),
                         ('[project]\n[project.urls]\na = "b"\n', "sub-tables"),
                         ('[project]\na = 1\na = 2\n', "set twice"),
                         ('[tool.x]\n', "no [project] table")):
            with self.assertRaises(BackendError, msg=bad) as cm:
                read(bad)
            self.assertIn(why, str(cm.exception), bad)


class PipInstallTest(unittest.TestCase):
    """pip from a fresh virtualenv (ensurepip) installs the source tree with
    --no-index: nothing to fetch, on any stock Python >= 3.9."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="gvx-venv-")
        cls.venv = os.path.join(cls.tmp, "venv")
        try:
            import ensurepip  # noqa: F401
            import venv  # noqa: F401
        except ImportError as e:
            shutil.rmtree(cls.tmp)
            raise unittest.SkipTest(f"no venv/ensurepip in {sys.executable} ({e}); Debian: apt-get install python3-venv")
        r = subprocess.run([sys.executable, "-m", "venv", cls.venv], capture_output=True, text=True,
                           env=clean_env(), cwd=cls.tmp)
        if r.returncode != 0:
            shutil.rmtree(cls.tmp)
            raise unittest.SkipTest(f"{sys.executable} -m venv fails, so there is no pip to test with "
                                    f"(Debian: apt-get install python3-venv): {r.stdout}{r.stderr}".strip())
        cls.python = os.path.join(cls.venv, "bin", "python")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def run_venv(self, *args):
        r = subprocess.run([self.python, *args], capture_output=True, text=True, env=clean_env(), cwd=self.tmp)
        self.assertEqual(r.returncode, 0, f"{' '.join(args)}: {r.stdout}{r.stderr}")
        return r.stdout

    def install(self, *flags):
        before = tree_snapshot(ROOT)
        self.run_venv("-m", "pip", "install", "--no-index", *flags, ROOT)
        self.addCleanup(self.run_venv, "-m", "pip", "uninstall", "-y", "gvx")
        self.assertEqual(tree_snapshot(ROOT), before, "pip install wrote into the source tree")
        out = self.run_venv("-c", "import gvx, importlib.metadata as m, json; "
                            "print(json.dumps([gvx.__version__, m.version('gvx'), gvx.__file__, "
                            "m.metadata('gvx')['Requires-Python'], hasattr(gvx, 'Client')]))")
        return json.loads(out)

    def test_install_no_index(self):
        version, dist_version, path, rp, has_client = self.install()
        self.assertEqual((version, dist_version, rp, has_client), (source_version(), source_version(), ">=3.9", True))
        self.assertTrue(path.startswith(self.venv + os.sep), f"gvx imported from {path}, not the venv")

    def test_install_no_build_isolation(self):
        version, dist_version, path, _, _ = self.install("--no-build-isolation")
        self.assertEqual((version, dist_version), (source_version(), source_version()))
        self.assertTrue(path.startswith(self.venv + os.sep), f"gvx imported from {path}, not the venv")

    def test_install_editable(self):
        version, dist_version, path, _, _ = self.install("-e")
        self.assertEqual((version, dist_version), (source_version(), source_version()))
        self.assertEqual(path, os.path.join(ROOT, "gvx", "__init__.py"), "an editable install imports the source")


if __name__ == "__main__":
    unittest.main()
