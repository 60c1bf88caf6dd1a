"""Fixtures: tiny random checkpoints (written once per session with mosaic.make_test_model) and
the `mosaic` command line for the agreement tests.

    PYTHONPATH=build/python MOSAIC_CLI=build/src/cli/mosaic /usr/bin/python3 -m pytest tests/python
"""

import json
import os
import subprocess

import pytest

import mosaic
from tiny_tokenizer import TOKENIZER_SIZE, write_tokenizer

# The dimensions of tests/cli: one layer, hidden 64; fast enough to run hundreds of steps.
TINY = dict(layers=1, hidden=64, heads=2, ffn=96)


@pytest.fixture(scope="session")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    tokenizer = write_tokenizer(str(root / "tokenizer.json"))
    return {
        "llada": mosaic.make_test_model(root / "llada", family="llada", vocab=1024, seed=3, **TINY),
        "dream": mosaic.make_test_model(root / "dream", family="dream", vocab=1024, seed=4, kv_heads=1, **TINY),
        "llada_text": mosaic.make_test_model(root / "llada_text", family="llada", vocab=TOKENIZER_SIZE,
                                             tokenizer=tokenizer, seed=5, **TINY),
        "dream_text": mosaic.make_test_model(root / "dream_text", family="dream", vocab=TOKENIZER_SIZE,
                                             tokenizer=tokenizer, seed=6, kv_heads=1, **TINY),
    }


@pytest.fixture(scope="session")
def engines(models):
    return {name: mosaic.Engine(path, device="cpu") for name, path in models.items()}


@pytest.fixture(scope="session")
def cli():
    """Runs `mosaic ARGS...`; returns stdout, failing the test with stderr on a non-zero exit."""
    path = os.environ.get("MOSAIC_CLI") or os.path.join(os.path.dirname(__file__), "..", "..", "build",
                                                         "src", "cli", "mosaic")
    if not os.access(path, os.X_OK):
        pytest.fail(f"the mosaic command line is needed for the agreement tests: {path} (set MOSAIC_CLI)")

    def run(*args):
        proc = subprocess.run([path, *map(str, args)], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    run.json = lambda *args: json.loads(run(*args, "--json"))
    return run
