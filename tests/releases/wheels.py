"""Wheels of the stand-in engine (tests/data/plugins/specseed_standin) at any version, written
by hand: a wheel is a zip with the package, its METADATA, WHEEL, entry points and RECORD."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path

STANDIN = Path(__file__).parent.parent / "data" / "plugins" / "specseed_standin" / "__init__.py"


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def standin_wheel(folder: Path, version: str) -> Path:
    """``specseed_standin-VERSION-py3-none-any.whl`` in ``folder``."""
    info = f"specseed_standin-{version}.dist-info"
    files = {
        "specseed_standin/__init__.py": STANDIN.read_bytes(),
        f"{info}/METADATA": (
            f"Metadata-Version: 2.1\nName: specseed-standin\nVersion: {version}\n"
        ).encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\n"
        b"Tag: py3-none-any\n",
        f"{info}/entry_points.txt": b"[specseed.engines]\nstandin = specseed_standin:ENGINE\n",
    }
    record = "".join(f"{name},{_record_hash(data)},{len(data)}\n" for name, data in files.items())
    record += f"{info}/RECORD,,\n"
    path = folder / f"specseed_standin-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        for name, data in files.items():
            wheel.writestr(name, data)
        wheel.writestr(f"{info}/RECORD", record)
    return path
