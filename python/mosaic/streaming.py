"""engine.stream(): the generation runs in a worker thread and hands each step to the caller's
generator through a queue. Closing the generator early (break, del, .close()), an exception in
the loop body, or Ctrl-C while it waits cancels the generation at the next step boundary and
joins the worker, so no generation outlives its generator."""

import queue
import threading

_STEP, _DONE, _FAILED = "step", "done", "failed"


def stream_steps(run, make_event):
    """Yields make_event(step) for every step of run(on_step), which the worker thread calls;
    the generator's return value (StopIteration.value) is what run returned."""
    events = queue.Queue()
    stop = threading.Event()

    def on_step(step):
        if stop.is_set():
            return False  # the consumer has gone: cancel the generation
        events.put((_STEP, make_event(step)))
        return True

    def work():
        try:
            events.put((_DONE, run(on_step)))
        except BaseException as error:  # handed to the consumer, raised there
            events.put((_FAILED, error))

    worker = threading.Thread(target=work, name="mosaic-stream", daemon=True)
    worker.start()
    try:
        while True:
            kind, payload = events.get()
            if kind == _STEP:
                yield payload
            elif kind == _DONE:
                return payload
            else:
                raise payload
    finally:
        stop.set()
        worker.join()
