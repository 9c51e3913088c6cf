# SPDX-License-Identifier: LGPL-2.1-or-later
"""execpack_build: the build backend of the execpack package (PEP 517).

The package is pure Python (ctypes), so a wheel is a zip of its files and
a dist-info directory; this backend writes one with the standard library
alone.  setuptools before 70.1 builds wheels only with the separate
`wheel` package, which a fresh `python3 -m venv` on Debian 12 does not
have: `pip install --no-build-isolation --no-index ./python` failed there
with "invalid command 'bdist_wheel'".  With this backend that command
needs nothing but pip, offline.

What goes in: pyproject.toml's [project] table (PEP 621: name,
description, readme, requires-python, license, authors, classifiers,
optional-dependencies; the version, "dynamic", is __version__ of the
package's __init__.py) and every file of the packages that
[tool.execpack-build] names, less bytecode.  The hooks are PEP 517's
build_wheel and build_sdist, and prepare_metadata_for_build_wheel.
"""

import base64
import hashlib
import io
import os
import re
import tarfile
import time
import zipfile
from typing import Any, Dict, List, Optional, Tuple

__all__ = ["build_wheel", "build_sdist", "prepare_metadata_for_build_wheel",
           "get_requires_for_build_wheel", "get_requires_for_build_sdist"]

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TAG = "py3-none-any"
# what the sdist holds besides the packages: the project's own files
SDIST_EXTRA = ("pyproject.toml", "README.md", "backend", "tests")


def _pyproject() -> Dict[str, Any]:
    try:
        import tomllib as toml  # Python 3.11
    except ImportError:
        try:
            import tomli as toml  # type: ignore[no-redef]
        except ImportError:
            raise RuntimeError("building execpack needs Python 3.11 (tomllib) or the "
                               "tomli package, to read pyproject.toml") from None
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        data: Dict[str, Any] = toml.load(f)
    return data


class _Project:
    """The [project] table, checked, with the version filled in."""

    def __init__(self) -> None:
        data = _pyproject()
        self.meta: Dict[str, Any] = data["project"]
        cfg = data.get("tool", {}).get("execpack-build", {})
        self.packages: List[str] = list(cfg.get("packages", []))
        if not self.packages:
            raise RuntimeError("pyproject.toml: [tool.execpack-build] names no packages")
        self.name: str = self.meta["name"]
        self.version: str = self.meta.get("version") or self._version()
        # wheel and sdist file names: the name normalized (PEP 427, PEP 625)
        self.dist = re.sub(r"[-_.]+", "_", self.name).lower()

    def _version(self) -> str:
        if "version" not in self.meta.get("dynamic", []):
            raise RuntimeError("pyproject.toml: [project] has no version")
        init = os.path.join(ROOT, self.packages[0], "__init__.py")
        with open(init, encoding="utf-8") as f:
            m = re.search(r'^__version__\s*=\s*"([^"]+)"', f.read(), re.M)
        if not m:
            raise RuntimeError("%s: no __version__ = \"...\"" % init)
        return m.group(1)

    def metadata(self) -> str:
        """Core metadata 2.1 (the METADATA and PKG-INFO file)."""
        m = self.meta
        lines = ["Metadata-Version: 2.1", "Name: " + self.name, "Version: " + self.version]
        if "description" in m:
            lines.append("Summary: " + m["description"])
        authors = [a["name"] for a in m.get("authors", []) if "name" in a]
        if authors:
            lines.append("Author: " + ", ".join(authors))
        lic = m.get("license", {})
        if "text" in lic:
            lines.append("License: " + lic["text"])
        lines += ["Classifier: " + c for c in m.get("classifiers", [])]
        if "requires-python" in m:
            lines.append("Requires-Python: " + m["requires-python"])
        lines += ["Requires-Dist: " + d for d in m.get("dependencies", [])]
        for extra, deps in sorted(m.get("optional-dependencies", {}).items()):
            lines.append("Provides-Extra: " + extra)
            lines += ['Requires-Dist: %s; extra == "%s"' % (d, extra) for d in deps]
        body = ""
        readme = m.get("readme")
        if isinstance(readme, str):
            with open(os.path.join(ROOT, readme), encoding="utf-8") as f:
                body = f.read()
            kind = "text/markdown" if readme.endswith(".md") else "text/plain"
            lines.append("Description-Content-Type: " + kind)
        return "\n".join(lines) + "\n\n" + body

    def files(self) -> List[Tuple[str, str]]:
        """(path in the archive, path on disk) of every package file."""
        out = []
        for pkg in self.packages:
            top = os.path.join(ROOT, pkg)
            for d, dirs, names in os.walk(top):
                dirs[:] = sorted(x for x in dirs if x != "__pycache__")
                for n in sorted(names):
                    if n.endswith((".pyc", ".pyo")):
                        continue
                    path = os.path.join(d, n)
                    out.append((os.path.relpath(path, ROOT).replace(os.sep, "/"), path))
        return out


def _epoch() -> int:
    """SOURCE_DATE_EPOCH (reproducible builds), else 1980-01-01, the
    earliest time a zip file can hold."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "")
    return max(int(epoch), 315532800) if epoch.isdigit() else 315532800


def _timestamp() -> Tuple[int, int, int, int, int, int]:
    t = time.gmtime(_epoch())
    return (t.tm_year, t.tm_mon, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec)


class _Wheel:
    def __init__(self, path: str) -> None:
        self.zip = zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED)
        self.record: List[str] = []

    def add(self, name: str, data: bytes) -> None:
        info = zipfile.ZipInfo(name, _timestamp())
        info.external_attr = 0o644 << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        self.zip.writestr(info, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
        self.record.append("%s,sha256=%s,%d" % (name, digest.decode(), len(data)))

    def close(self, record_name: str) -> None:
        self.record.append(record_name + ",,")
        info = zipfile.ZipInfo(record_name, _timestamp())
        info.external_attr = 0o644 << 16
        self.zip.writestr(info, "\n".join(self.record) + "\n")
        self.zip.close()


def _dist_info(p: _Project) -> Dict[str, bytes]:
    wheel = "Wheel-Version: 1.0\nGenerator: execpack_build\nRoot-Is-Purelib: true\nTag: %s\n" % TAG
    top = "".join(pkg + "\n" for pkg in p.packages)
    return {"METADATA": p.metadata().encode("utf-8"), "WHEEL": wheel.encode(),
            "top_level.txt": top.encode()}


def get_requires_for_build_wheel(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    return []


def get_requires_for_build_sdist(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    return []


def prepare_metadata_for_build_wheel(metadata_directory: str,
                                     config_settings: Optional[Dict[str, Any]] = None) -> str:
    p = _Project()
    name = "%s-%s.dist-info" % (p.dist, p.version)
    os.makedirs(os.path.join(metadata_directory, name), exist_ok=True)
    for fname, data in _dist_info(p).items():
        with open(os.path.join(metadata_directory, name, fname), "wb") as f:
            f.write(data)
    return name


def build_wheel(wheel_directory: str, config_settings: Optional[Dict[str, Any]] = None,
                metadata_directory: Optional[str] = None) -> str:
    p = _Project()
    fname = "%s-%s-%s.whl" % (p.dist, p.version, TAG)
    info = "%s-%s.dist-info" % (p.dist, p.version)
    w = _Wheel(os.path.join(wheel_directory, fname))
    try:
        for arc, path in p.files():
            with open(path, "rb") as f:
                w.add(arc, f.read())
        for name, data in _dist_info(p).items():
            w.add(info + "/" + name, data)
    finally:
        w.close(info + "/RECORD")
    return fname


def build_sdist(sdist_directory: str,
                config_settings: Optional[Dict[str, Any]] = None) -> str:
    p = _Project()
    base = "%s-%s" % (p.dist, p.version)
    fname = base + ".tar.gz"

    def add(tar: tarfile.TarFile, arc: str, data: bytes) -> None:
        ti = tarfile.TarInfo(base + "/" + arc)
        ti.size, ti.mode, ti.mtime = len(data), 0o644, _epoch()
        tar.addfile(ti, io.BytesIO(data))

    paths = dict(p.files())
    for extra in SDIST_EXTRA:
        top = os.path.join(ROOT, extra)
        if os.path.isfile(top):
            paths[extra] = top
            continue
        for d, dirs, names in os.walk(top):
            dirs[:] = sorted(x for x in dirs if x != "__pycache__")
            for n in sorted(names):
                if not n.endswith((".pyc", ".pyo")):
                    path = os.path.join(d, n)
                    paths[os.path.relpath(path, ROOT).replace(os.sep, "/")] = path
    with tarfile.open(os.path.join(sdist_directory, fname), "w:gz",
                      format=tarfile.PAX_FORMAT) as tar:
        add(tar, "PKG-INFO", p.metadata().encode("utf-8"))
        for arc in sorted(paths):
            with open(paths[arc], "rb") as f:
                add(tar, arc, f.read())
    return fname
