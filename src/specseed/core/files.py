"""The one writer of specseed's output files: reports, bundle files, minimized scenarios.

Every text is scrubbed of secrets on its way out (``specseed.core.secrets``). A file is
written to a temporary file in the same folder, flushed to disk (``fsync``), renamed
over the target (``os.replace``, atomic on POSIX) and the rename made durable by syncing the
folder. A full disk, a killed process or Ctrl-C leaves either the previous file or the complete
new one, never a cut-off document or an empty file; the temporary file is removed on failure.

A new file gets the mode a plain ``open()`` would give it (0666 less the umask) and a file
written over keeps its mode, so an atomic report reads like any other file (a private 0600
temporary file renamed into place would not).

Inside a folder specseed owns (a bundle) a path from outside may not lead the writes
elsewhere: ``write_inside`` and ``create_inside`` open every folder below the one the user
named without following a symlink (``O_NOFOLLOW``, relative to the folder's descriptor), and
refuse (``NotOwned``) a symlink, FIFO, device or folder where a file is to be written; a file
is replaced atomically (``rename`` never follows the name it replaces) or created anew
(``O_EXCL``), so no write reaches a file specseed did not make, a hard link's other names
included.

Trace files stream step by step while the engine runs (``traces.records.TraceWriter``); they
are opened here (``create_inside``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Sequence
from pathlib import Path

from specseed.core.errors import OutputError
from specseed.core.secrets import scrub_text

_TRIES = 100
"""Temporary names tried before giving up (each one random, so one clash is already rare)."""


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8, secrets removed) to ``path``; ``OSError`` on failure, its
    ``filename`` naming the file that could not be written.

    A regular file (or a new one) is replaced atomically; a symlink is followed and its
    target replaced; a device, a pipe, ``/dev/stdout`` or a process substitution
    (``/dev/fd/N``) is opened and written to, never replaced. The folder must exist: a
    missing one is the caller's input error, not something to create here."""
    # backslashreplace: a lone surrogate (from a server's JSON) is written as ``\ud800``
    # rather than losing the file to UnicodeEncodeError.
    data = scrub_text(text, by_name=False).encode("utf-8", "backslashreplace")
    target, direct = _destination(path)
    if direct:
        _write_in_place(target, data)
        return
    folder = target.parent
    fd, tmp = _create_temporary(target)
    try:
        with contextlib.suppress(FileNotFoundError):
            os.fchmod(fd, stat.S_IMODE(os.stat(target).st_mode))
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if exc.filename is None or str(exc.filename) == tmp:
            exc.filename = str(path)
        raise
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_folder(folder)


_IN_PLACE_ROOTS = ("/dev/", "/proc/")
"""Paths under these are the process's own streams and devices (``/dev/stdout`` is a link to
``/proc/self/fd/1``): written to where they are, even when the stream is a regular file."""


def _destination(path: Path) -> tuple[Path, bool]:
    """Where to write, and whether in place (True) or by atomic replacement (False)."""
    try:
        mode = os.stat(path).st_mode  # follows symlinks: the target is what counts
    except FileNotFoundError:
        # A new file, or a dangling symlink: create its target.
        return Path(os.path.realpath(path)) if os.path.islink(path) else path, False
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    if not stat.S_ISREG(mode):
        return path, True  # a device, FIFO or socket: never replace the node
    real = os.path.realpath(path)
    if str(path).startswith(_IN_PLACE_ROOTS) or real.startswith(_IN_PLACE_ROOTS):
        return path, True
    return Path(real), False


def _write_in_place(path: Path, data: bytes) -> None:
    """Open a non-regular file (or the process's own stream) for writing and write to it.
    A stream that is a regular file is appended to: the shell opened it, and truncating it
    would drop what was written to it before."""
    flags = os.O_WRONLY | os.O_APPEND | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        exc.filename = str(path)
        raise
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
    except OSError as exc:
        exc.filename = str(path)
        raise
    finally:
        os.close(fd)


def write_output(path: Path, text: str, what: str) -> None:
    """``write_atomic`` for a report document: ``OutputError`` naming ``what`` on failure (the
    audit's findings stand; only this output is missing)."""
    try:
        write_atomic(path, text)
    except OSError as exc:
        raise OutputError(
            f"cannot write the {what} to {path}: {exc.strerror or exc}",
            hint="free space or choose another path; the findings are in the terminal report",
        ) from None


def _create_temporary(path: Path) -> tuple[int, str]:
    """A new file beside ``path``, opened for writing, created with mode 0666 so that the
    umask applies (``tempfile.mkstemp`` would make it 0600)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(_TRIES):
        tmp = str(path.parent / f".{path.name}.{secrets.token_hex(4)}.tmp")
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {path}")


def _fsync_folder(folder: Path) -> None:
    """Make the rename itself durable (POSIX; a no-op where folders cannot be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


# -- inside a folder specseed owns --------------------------------------------------------

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)


class NotOwned(OSError):
    """A path inside a folder specseed owns that specseed did not make: a symlink, a FIFO, a
    device, a folder where a file belongs, or a file with other hard links. Never written
    through."""

    def __init__(self, path: Path | str, what: str) -> None:
        super().__init__(
            errno.ELOOP, f"{what}; specseed writes only what it made itself in it", str(path)
        )


def _parts(relative: str | Sequence[str]) -> tuple[str, ...]:
    parts = (relative,) if isinstance(relative, str) else tuple(relative)
    for part in parts:
        if not part or part in (".", "..") or "/" in part or "\0" in part:
            raise ValueError(f"not one plain path component: {part!r}")
    return parts


def open_folder(root: Path, parts: Sequence[str] = (), *, create: bool = False) -> int:
    """A descriptor on ``root / *parts``: ``root`` as given (the user named it), each part
    below it opened without following a symlink (``NotOwned`` for a symlink or a file), made
    first when ``create``. The caller closes it."""
    fd = os.open(root, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    where = Path(root)
    try:
        for part in _parts(parts):
            where = where / part
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o777, dir_fd=fd)
            try:
                sub = os.open(part, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise NotOwned(where, "a symlink or a file where a folder belongs") from None
                exc.filename = str(where)
                raise
            os.close(fd)
            fd = sub
    except BaseException:
        os.close(fd)
        raise
    return fd


def _lstat_at(name: str, fd: int) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _not_a_file(where: Path | str, st: os.stat_result) -> NotOwned | None:
    if stat.S_ISLNK(st.st_mode):
        return NotOwned(where, "a symlink")
    if stat.S_ISDIR(st.st_mode):
        return NotOwned(where, "a folder where a file belongs")
    if not stat.S_ISREG(st.st_mode):
        return NotOwned(where, "not a regular file (a FIFO, socket or device)")
    return None


def write_inside(root: Path, relative: str | Sequence[str], text: str) -> None:
    """``write_atomic`` for a file inside ``root``, a folder specseed owns: folders below
    ``root`` opened (and made) without following links; a symlink, FIFO, device or folder at
    the file's name is refused (``NotOwned``); otherwise a temporary file beside it is
    written, synced and renamed over the name (a rename replaces the name, never what a
    link points to). ``OSError`` on failure, its ``filename`` naming the file."""
    parts = _parts(relative)
    where = Path(root).joinpath(*parts)
    data = scrub_text(text, by_name=False).encode("utf-8")
    fd = open_folder(root, parts[:-1], create=True)
    name = parts[-1]
    try:
        st = _lstat_at(name, fd)
        if st is not None and (refused := _not_a_file(where, st)) is not None:
            raise refused
        tmp = _create_temporary_at(fd, name)
        try:
            handle = os.fdopen(os.open(tmp, os.O_WRONLY | _NOFOLLOW | _CLOEXEC, dir_fd=fd), "wb")
            with handle:
                if st is not None:
                    os.fchmod(handle.fileno(), stat.S_IMODE(st.st_mode))
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=fd)
            raise
        with contextlib.suppress(OSError):
            os.fsync(fd)
    except OSError as exc:
        if not isinstance(exc, NotOwned):
            exc.filename = str(where)
        raise
    finally:
        os.close(fd)


def _create_temporary_at(fd: int, name: str) -> str:
    """A new empty file beside ``name`` in the folder ``fd`` (mode 0666 less the umask)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
    for _ in range(_TRIES):
        tmp = f".{name}.{secrets.token_hex(4)}.tmp"
        try:
            os.close(os.open(tmp, flags, 0o666, dir_fd=fd))
        except FileExistsError:
            continue
        return tmp
    raise FileExistsError(f"no free temporary name beside {name}")


def create_inside(
    root: Path, relative: str | Sequence[str], *, append: bool = False, replace: bool = True
) -> int:
    """A file inside ``root`` (a folder specseed owns) opened for writing, which only
    specseed's writes reach: created anew (``O_EXCL``, never through a link); a regular file
    left there before is removed first (its other hard links keep their text). ``append``:
    an existing regular file with no other hard link is appended to instead (``replace``
    False: any other file at the name is refused rather than removed). A symlink, FIFO,
    device or folder at the name is refused (``NotOwned``). Folders below ``root`` are
    opened as ``write_inside`` opens them. Returns the descriptor (the caller closes it)."""
    parts = _parts(relative)
    where = Path(root).joinpath(*parts)
    fd = open_folder(root, parts[:-1], create=True)
    name = parts[-1]
    create = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
    try:
        for _ in range(_TRIES):
            st = _lstat_at(name, fd)
            if st is not None:
                refused = _not_a_file(where, st)
                if refused is not None:
                    raise refused
                if append and st.st_nlink == 1:
                    out = os.open(name, os.O_WRONLY | os.O_APPEND | _NOFOLLOW | _CLOEXEC, dir_fd=fd)
                    now = os.fstat(out)
                    if (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino) and now.st_nlink == 1:
                        return out
                    os.close(out)  # swapped or linked since the lstat: start anew
                if not replace:
                    raise NotOwned(where, "a file with other hard links")
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(name, dir_fd=fd)
            try:
                return os.open(name, create, 0o666, dir_fd=fd)
            except FileExistsError:
                continue  # made again since the unlink: look again
        raise FileExistsError(errno.EEXIST, "the file keeps coming back", str(where))
    except OSError as exc:
        if not isinstance(exc, NotOwned):
            exc.filename = str(where)
        raise
    finally:
        os.close(fd)


def read_inside(root: Path, relative: str | Sequence[str], limit: int) -> bytes | None:
    """A regular file inside ``root`` with no other hard link, at most ``limit`` bytes, read
    without following a link; None when it is missing, too large, or not such a file."""
    parts = _parts(relative)
    try:
        fd = open_folder(root, parts[:-1])
    except OSError:
        return None
    try:
        try:
            file = os.open(parts[-1], os.O_RDONLY | _NOFOLLOW | _CLOEXEC | os.O_NONBLOCK, dir_fd=fd)
        except OSError:
            return None
        with os.fdopen(file, "rb") as handle:
            st = os.fstat(handle.fileno())
            if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 or st.st_size > limit:
                return None
            data = handle.read(limit + 1)
            return data if len(data) <= limit else None
    finally:
        os.close(fd)
