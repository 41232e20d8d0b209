"""The project environment welcomes additions: pip is there, and the scripts keep what a user installed."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_the_venv_has_pip() -> None:
    done = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert Path(sys.executable).parent.joinpath("pip").exists()  # `.venv/bin/pip install ...` as the docs say


def test_fastapi_comes_with_the_server_extra() -> None:
    import fastapi  # noqa: F401

    pyproject = (ROOT / "pyproject.toml").read_text()
    server = next(line for line in pyproject.splitlines() if line.startswith("server = "))
    assert '"fastapi' in server


@pytest.fixture
def user_package() -> Iterator[Path]:
    """A distribution the user installed into .venv by hand (not in uv.lock)."""
    site = Path(sysconfig.get_paths()["purelib"])
    info = site / "user_added_pkg-1.0.dist-info"
    module = site / "user_added_pkg.py"
    info.mkdir()
    module.write_text("VALUE = 42\n")
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: user-added-pkg\nVersion: 1.0\n")
    (info / "INSTALLER").write_text("pip\n")
    (info / "RECORD").write_text(f"user_added_pkg.py,,\n{info.name}/METADATA,,\n{info.name}/RECORD,,\n")
    yield module
    module.unlink(missing_ok=True)
    for cached in (site / "__pycache__").glob("user_added_pkg.*.pyc"):  # cached by the test's import
        cached.unlink()
    for path in info.glob("*"):
        path.unlink()
    info.rmdir()


def test_the_bootstrap_keeps_packages_the_user_added(user_package: Path) -> None:
    if Path(sys.prefix).resolve() != (ROOT / ".venv").resolve():
        raise AssertionError(f"run the tests with the project venv ({ROOT / '.venv'}), not {sys.prefix}")
    env = {k: v for k, v in os.environ.items() if not k.startswith("UV_")}
    done = subprocess.run(
        ["bash", "-c", "source scripts/_bootstrap.sh"], cwd=ROOT, capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert user_package.exists(), "uv sync removed a package the user installed"
    check = subprocess.run(
        [sys.executable, "-c", "import user_added_pkg; print(user_added_pkg.VALUE)"],
        text=True,
        capture_output=True,
        timeout=60,
    )
    assert check.stdout.strip() == "42"
