"""Hostile and careless Python calls: refused by name with the exception Python code expects,
never pybind11's "incompatible function arguments", never a truthy stand-in taken for True,
never an abort at interpreter exit (issue 29)."""

import os
import shutil
import signal
import subprocess
import sys
import textwrap

import pytest

import mosaic


def test_flags_must_be_bools(engines):
    engine = engines["llada"]
    with pytest.raises(TypeError, match="allow_long_context must be True or False, got str 'no'"):
        engine.generate([5, 6, 7], gen_length=8, steps=8, allow_long_context="no")
    with pytest.raises(TypeError, match="chat must be True or False"):
        engines["llada_text"].generate("hello", chat="yes", gen_length=8, steps=8)
    with pytest.raises(TypeError, match="allow_long_context must be True or False"):
        next(engine.stream([5, 6, 7], gen_length=8, steps=8, allow_long_context=1))


def test_device_index_out_of_range(models):
    with pytest.raises(ValueError, match="no CUDA device has index 99999999999999999999"):
        mosaic.Engine(models["llada"], device="cuda:99999999999999999999")


def test_text_that_is_not_unicode(engines):
    engine = engines["llada_text"]
    with pytest.raises(ValueError, match="prompt is not valid Unicode text: surrogates not allowed at index 2"):
        engine.generate("ab\udcffcd", gen_length=8, steps=8)
    with pytest.raises(ValueError, match="text is not valid Unicode text"):
        engine.encode("\ud800")


def test_sizes_beyond_64_bits(models):
    with pytest.raises(ValueError, match="seq_len = 18446744073709551616 is out of range"):
        mosaic.plan(models["llada"], seq_len=2**64, device="cpu")
    with pytest.raises(mosaic.Error, match="more than 2147483647 positions"):
        mosaic.plan(models["llada"], seq_len=2**63 - 1, device="cpu")
    with pytest.raises(mosaic.Error, match="gen_length 9223372036854775807 exceeds the 2147483647 positions"):
        mosaic.Engine(models["llada"], device="cpu").generate([1, 2], gen_length=2**63 - 1, steps=8)


def test_values_refused_by_name(engines):
    engine = engines["llada"]
    for kwargs, message in (({"block_length": 0}, "block_length must be at least 1"),
                            ({"eot_id": -7}, "eot_id must be a token id >= 0"),
                            ({"temperature": 1e-320}, "temperature must be 0 \\(greedy\\) or at least"),
                            ({"cfg_scale": 1e39}, "cfg_scale must be in \\[0, 1000000\\]"),
                            ({"threshold": float("nan")}, "threshold must be in \\[0, 1\\]"),
                            ({"steps": 9}, "steps 9 exceeds gen_length 8")):
        with pytest.raises(ValueError, match=message):
            engine.generate([5, 6, 7], **{"gen_length": 8, "steps": 8, **kwargs})


def test_non_utf8_folder_name(models, tmp_path):
    folder = os.path.join(os.fsencode(tmp_path), b"model-\xff")
    shutil.copytree(os.fsencode(models["llada"]), folder)
    engine = mosaic.Engine(folder, device="cpu")  # bytes, as os.listdir(bytes) gives them
    assert len(engine.generate([5, 6, 7], gen_length=8, steps=8).output_ids) == 8
    engine = mosaic.Engine(os.fsdecode(folder), device="cpu")  # str with a surrogate escape
    assert engine.info["vocab"] == 1024
    assert mosaic.plan(os.fsdecode(folder), seq_len=64, device="cpu")["tokens"] == 64


def test_an_error_quoting_bytes_that_are_not_utf8(models, tmp_path):
    """The one-line message reaches Python even when it quotes undecodable bytes."""
    folder = tmp_path / "bad"
    shutil.copytree(models["llada"], folder)
    with open(folder / "config.json", "wb") as f:
        f.write(b'{"architectures": ["\xff\xfe"], "model_type": "llada"}')
    with pytest.raises(mosaic.Error) as raised:
        mosaic.Engine(folder, device="cpu")
    assert str(raised.value), "the message must not be empty"


def test_unreadable_folder_is_a_permission_error(models, tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root reads every folder; the permission check needs an ordinary user")
    folder = tmp_path / "locked"
    shutil.copytree(models["llada"], folder)
    os.chmod(folder, 0)
    try:
        with pytest.raises(PermissionError):
            mosaic.Engine(folder, device="cpu")
    finally:
        os.chmod(folder, 0o755)


EXIT_CHILD = textwrap.dedent("""
    import os, signal, sys, threading, time
    import mosaic
    engine = mosaic.Engine(sys.argv[1], device="cpu")
    mode = sys.argv[2]
    worker = threading.Thread(target=lambda: engine.generate([5, 6, 7], gen_length=2048, steps=2048),
                              daemon=True)
    worker.start()
    time.sleep(0.3)
    if mode == "ctrl-c":
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)
    print("leaving", flush=True)
""")


@pytest.mark.parametrize("mode", ["exit", "ctrl-c"])
def test_exit_while_a_worker_thread_generates(models, mode):
    """Interpreter exit (plain, or by Ctrl-C) while a daemon thread
    is inside generate(): the process ends normally, never by SIGABRT ("terminate called...")."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    # The abort was a race: before the fix, 2 of 5 plain exits ended by SIGABRT or SIGSEGV here.
    for _ in range(8 if mode == "exit" else 2):
        proc = subprocess.run([sys.executable, "-c", EXIT_CHILD, models["llada"], mode], capture_output=True,
                              text=True, timeout=120, env=env)
        assert "terminate called" not in proc.stderr, proc.stderr
        if mode == "ctrl-c":
            # An unhandled KeyboardInterrupt ends Python by SIGINT (so the shell sees a Ctrl-C), never SIGABRT.
            assert proc.returncode == -signal.SIGINT, f"status {proc.returncode}: {proc.stderr}"
            assert "KeyboardInterrupt" in proc.stderr, proc.stderr
        else:
            assert proc.returncode == 0 and "leaving" in proc.stdout, proc.stdout + proc.stderr
