"""The GIL is released while the engine works, and Ctrl-C stops a generation cleanly (in a
child process: a KeyboardInterrupt inside pytest's own process would end the session)."""

import os
import subprocess
import sys
import textwrap
import threading
import time


def test_other_threads_run_during_generation(engines):
    ticks = 0
    stop = threading.Event()

    def count():
        nonlocal ticks
        while not stop.is_set():
            ticks += 1

    counter = threading.Thread(target=count)
    counter.start()
    try:
        before = ticks
        started = time.monotonic()
        engines["llada"].generate([5, 6, 7], gen_length=128, steps=128)
        elapsed = time.monotonic() - started
        during = ticks - before
    finally:
        stop.set()
        counter.join()
    # With the GIL held the counter would stand still for the whole call.
    assert elapsed > 0.05 and during > 10000, (elapsed, during)


CHILD = textwrap.dedent("""
    import os, signal, sys, threading, time
    import mosaic
    engine = mosaic.Engine(sys.argv[1], device="cpu")
    mode = sys.argv[2]
    def interrupt_soon():
        time.sleep(0.3)
        os.kill(os.getpid(), signal.SIGINT)
    started = None
    try:
        if mode == "generate":
            threading.Thread(target=interrupt_soon).start()
            started = time.monotonic()
            engine.generate([5, 6, 7], gen_length=2048, steps=2048)
        else:
            for event in engine.stream([5, 6, 7], gen_length=2048, steps=2048):
                if started is None:
                    started = time.monotonic()
                    threading.Thread(target=interrupt_soon).start()
        print("not interrupted")
        sys.exit(1)
    except KeyboardInterrupt:
        print(f"interrupted after {time.monotonic() - started:.2f} s")
    assert not [t for t in threading.enumerate() if t.name == "mosaic-stream"], "worker still running"
    result = engine.generate([5, 6, 7], gen_length=8, steps=4)  # the engine is usable again
    print("then generated", len(result.output_ids))
""")


def run_child(model, mode):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    proc = subprocess.run([sys.executable, "-c", CHILD, model, mode], capture_output=True, text=True,
                          timeout=120, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "interrupted after" in proc.stdout and "then generated 8" in proc.stdout, proc.stdout
    seconds = float(proc.stdout.split("interrupted after ")[1].split(" s")[0])
    assert seconds < 5, proc.stdout  # the full generation would take far longer


def test_ctrl_c_interrupts_generate(models):
    run_child(models["llada"], "generate")


def test_ctrl_c_interrupts_stream(models):
    run_child(models["llada"], "stream")
