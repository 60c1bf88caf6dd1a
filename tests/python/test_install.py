"""The documented install, `pip install --no-build-isolation .` into a venv that sees Debian's
packages, works offline and gives an importable package outside the source tree. It reuses the
build folder ctest runs from (MOSAIC_BUILD_DIR), so only packaging is timed here."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def test_pip_install_into_a_venv(tmp_path, models):
    build_dir = os.environ.get("MOSAIC_BUILD_DIR")
    if not build_dir:
        pytest.skip("set MOSAIC_BUILD_DIR to a configured build folder (ctest does)")
    venv = tmp_path / "venv"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PIP_NO_INPUT"] = "1"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", venv], check=True, env=env)
    pip = subprocess.run([venv / "bin" / "python", "-m", "pip", "install", "--no-build-isolation", "--no-index",
                          "--no-cache-dir", "--quiet", ROOT], capture_output=True, text=True, env=env, timeout=600)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    check = subprocess.run(
        [venv / "bin" / "python", "-c",
         "import sys, mosaic; e = mosaic.Engine(sys.argv[1], device='cpu');"
         "print(mosaic.__file__); print(e.generate([5, 6], gen_length=8, steps=4).steps)", models["llada"]],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert check.returncode == 0, check.stderr
    location, steps = check.stdout.split()
    assert location.startswith(str(venv)) and steps == "4"
