"""engine.stream: per-step events from a worker thread; leaving early cancels the generation."""

import threading
import time

import pytest

import mosaic


def stream_threads():
    return [t for t in threading.enumerate() if t.name == "mosaic-stream"]


def drain(generator):
    """(events, the generator's return value)."""
    events = []
    while True:
        try:
            events.append(next(generator))
        except StopIteration as stop:
            return events, stop.value


def test_events_follow_the_generation(engines):
    engine = engines["llada"]
    events, results = drain(engine.stream([5, 6, 7], gen_length=8, steps=4, temperature=0.5, seed=1))
    expected = engine.generate([5, 6, 7], gen_length=8, steps=4, temperature=0.5, seed=1)
    assert [e.step for e in events] == [1, 2, 3, 4]
    assert [e.finished for e in events] == [False, False, False, True]
    assert [e.masked_left for e in events] == [6, 4, 2, 0]
    assert all(isinstance(e, mosaic.StepEvent) and e.request == 0 for e in events)
    assert events[-1].output_ids == expected.output_ids
    assert sorted(p for e in events for p in e.committed) == list(range(8))
    assert [len(e.committed) for e in events] == expected.tokens_per_step
    assert events[0].committed_ids == [events[0].output_ids[p] for p in sorted(events[0].committed)]
    assert events[0].canvas().count("\u2591") == 6  # ids and masks without a tokenizer
    assert events[0].batch_sequences == 1 and events[0].planned_peak_bytes > 0
    assert [r.output_ids for r in results] == [expected.output_ids]
    assert not stream_threads()


def test_confidence_is_the_probability_of_the_committed_token(engines):
    """LLaDA greedy, low_confidence: each committed position's confidence is the softmax
    probability of its token, computed here from engine.forward's logits with NumPy."""
    import numpy as np

    engine = engines["llada"]
    prompt, gen_length = [5, 6, 7], 8
    events, _ = drain(engine.stream(prompt, gen_length=gen_length, steps=4))
    first = events[0]
    assert len(first.confidence) == len(first.committed) == 2
    mask = engine.info["mask_token_id"]
    canvas = prompt + [mask] * gen_length
    rows = [len(prompt) + p for p in first.committed]
    logits = np.asarray(engine.forward(canvas, rows), dtype=np.float64)
    # As the reference: softmax over the whole vocabulary; the mask id is only never chosen.
    probs = np.exp(logits - logits.max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    choosable = logits.copy()
    choosable[:, mask] = -np.inf
    for i, p in enumerate(first.committed):
        token = first.output_ids[p]
        assert token == int(np.argmax(choosable[i]))
        assert first.confidence[i] == pytest.approx(probs[i, token], rel=1e-4)
    for event in events:  # the top-k rule: nothing left masked was more confident
        assert all(0.0 < c <= 1.0 for c in event.confidence)


def test_batch_events_name_their_request(engines):
    events = list(engines["dream"].stream([[5, 6, 7], [8, 9]], gen_length=8, steps=4))
    assert sorted({e.request for e in events}) == [0, 1]
    assert sum(e.finished for e in events) == 2
    assert all(e.batch_sequences in (1, 2) for e in events)


def test_text_of_events(engines):
    engine = engines["llada_text"]
    events = list(engine.stream("the theory", gen_length=8, steps=8))
    final = engine.generate("the theory", gen_length=8, steps=8)
    assert events[-1].text == engine.decode([t for t in final.output_ids if t != engine.info["mask_token_id"]])
    assert sorted(t for e in events for t in e.committed_ids) == sorted(final.output_ids)
    assert all(isinstance(e.committed_text, str) for e in events)
    assert events[0].canvas(mask="_").count("_") == 7
    with pytest.raises(mosaic.Error, match="no tokenizer.json"):
        next(engines["llada"].stream([5], gen_length=8, steps=8)).text


def test_leaving_early_cancels_and_joins(engines):
    engine = engines["llada"]
    generator = engine.stream([5, 6, 7], gen_length=256, steps=256)
    first = next(generator)
    assert first.step == 1 and len(stream_threads()) == 1
    started = time.monotonic()
    generator.close()
    assert time.monotonic() - started < 2.0
    assert not stream_threads()
    for event in engine.stream([5, 6, 7], gen_length=64, steps=64):
        if event.step == 3:
            break
    del event
    assert not stream_threads()
    # The engine is free for the next call.
    assert engine.generate([5, 6, 7], gen_length=8, steps=4).steps == 4


def test_on_step_false_cancels(engines):
    engine = engines["llada"]._engine
    seen = []
    results = engine.generate([[5, 6, 7]], {"gen_length": 16, "steps": 16},
                              lambda step: seen.append(step["step"]) or step["step"] < 3)
    assert seen == [1, 2, 3]
    assert results[0]["cancelled"] and results[0]["steps"] == 3


def test_exception_in_on_step_propagates(engines):
    def explode(step):
        raise RuntimeError("from the callback")
    with pytest.raises(RuntimeError, match="from the callback"):
        engines["llada"]._engine.generate([[5, 6, 7]], {"gen_length": 8, "steps": 4}, explode)


def test_argument_errors_are_raised_at_the_call(engines):
    engine = engines["llada"]
    with pytest.raises(TypeError, match="stream\\(\\) got an unexpected keyword argument 'step'"):
        engine.stream([5, 6, 7], step=4)
    with pytest.raises(TypeError, match="steps must be an int"):
        engine.stream([5, 6, 7], steps="4")
    with pytest.raises(ValueError, match="the list is empty"):
        engine.stream([])
    # The family rules are the engine's: raised from the worker into the loop.
    generator = engine.stream([5, 6, 7], alg="entropy")
    with pytest.raises(mosaic.Error, match="apply to Dream models"):
        next(generator)
    assert not stream_threads()
