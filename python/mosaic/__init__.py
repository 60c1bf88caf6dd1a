"""Mosaic: memory-planned inference for masked diffusion language models (LLaDA, Dream).

    import mosaic

    engine = mosaic.Engine("/models/LLaDA-8B-Instruct", budget="24GiB")
    result = engine.generate("Why is the sky blue?", chat=True, gen_length=128, steps=128)
    print(result.text, result.steps, result.seconds)

    for event in engine.stream("Why is the sky blue?", chat=True, gen_length=64, steps=64):
        print(event.step, event.canvas())

    engine.plan(seq_len=32768)                   # the memory plan of one step, as a dict
    engine.forward([5, 6, 7, 126336], rows=[3])  # logits [1, vocab] as a NumPy array

The engine is C++ (the extension mosaic._mosaic); it runs with the GIL released.
"""

from mosaic._mosaic import SAMPLING_OPTIONS, Error, __version__
from mosaic.byte_size import parse_byte_size
from mosaic.compat import MosaicEngine
from mosaic.engine import Engine
from mosaic.planning import find_lmax, plan
from mosaic.results import GenerationResult, StepEvent
from mosaic.test_models import make_test_model

__all__ = [
    "Engine",
    "Error",
    "GenerationResult",
    "MosaicEngine",
    "SAMPLING_OPTIONS",
    "StepEvent",
    "find_lmax",
    "make_test_model",
    "parse_byte_size",
    "plan",
    "__version__",
]
