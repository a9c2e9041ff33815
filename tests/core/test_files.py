"""The one writer of output files: atomic, durable, and with the modes a plain open() gives."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

from specseed.core.errors import OutputError
from specseed.core.files import write_atomic, write_output


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_file_gets_the_mode_open_would_give_it(tmp_path: Path) -> None:
    old = os.umask(0o022)
    (tmp_path / "deep").mkdir()
    try:
        write_atomic(tmp_path / "deep" / "r.json", "{}\n")
        (tmp_path / "plain.json").write_text("{}\n")
    finally:
        os.umask(old)
    assert (tmp_path / "deep" / "r.json").read_text() == "{}\n"
    # mkstemp's private 0600 would hide a report from the CI user that uploads it.
    assert _mode(tmp_path / "deep" / "r.json") == _mode(tmp_path / "plain.json") == 0o644


def test_a_missing_folder_is_an_error_not_created(tmp_path: Path) -> None:
    # A typo in a folder name is the caller's input error (checked before a run); the writer
    # never creates folders on its own.
    with pytest.raises(FileNotFoundError):
        write_atomic(tmp_path / "typo" / "r.json", "{}\n")
    assert not (tmp_path / "typo").exists()


def test_a_file_written_over_keeps_its_mode(tmp_path: Path) -> None:
    target = tmp_path / "r.json"
    target.write_text("old\n")
    target.chmod(0o640)
    write_atomic(target, "new\n")
    assert target.read_text() == "new\n"
    assert _mode(target) == 0o640


def test_a_failed_write_leaves_the_old_file_and_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "r.json"
    target.write_text("old\n")

    def full(fd: int) -> None:  # the disk fills as the temporary file is synced
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError, match="No space left"):
        write_atomic(target, "new\n")
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_a_lone_surrogate_is_written_as_an_escape(tmp_path: Path) -> None:
    target = tmp_path / "r.md"
    write_atomic(target, "a\udcffb")  # UTF-8 cannot encode it: the file says what it was
    assert target.read_text(encoding="utf-8") == "a\\udcffb"


def test_write_output_names_what_could_not_be_written(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    target = blocker / "r.json"  # a file where the folder should be
    with pytest.raises(OutputError) as caught:
        write_output(target, "{}\n", "JSON report")
    assert caught.value.message.startswith(f"cannot write the JSON report to {target}: ")
    assert (
        caught.value.hint is not None and "findings are in the terminal report" in caught.value.hint
    )


def test_write_atomic_raises_oserror_naming_the_file(tmp_path: Path) -> None:
    target = tmp_path / "r.json"
    target.mkdir()  # a folder where the file should be
    with pytest.raises(IsADirectoryError) as caught:
        write_atomic(target, "{}\n")
    assert caught.value.strerror == "Is a directory"  # what `path.write_text` said before
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]
