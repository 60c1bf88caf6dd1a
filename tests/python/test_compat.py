"""MosaicEngine(model, {...}).generate(inputs=..., max_new_tokens=...): the same engine underneath."""

import pytest

import mosaic

CONFIG = {"max_seq_len": 64, "chunking_strategy": "lazy", "logits_kernel": "mask_only"}


def test_generate_maps_onto_engine_generate(models, engines):
    engine = mosaic.MosaicEngine(models["llada"], {**CONFIG, "device": "cpu"})
    result = engine.generate(inputs=[5, 6, 7], max_new_tokens=8, temperature=0.5, seed=3)
    expected = engines["llada"].generate([5, 6, 7], gen_length=8, steps=8, temperature=0.5, seed=3)
    assert result.output_ids == expected.output_ids and result.steps == 8
    batch = engine.generate(inputs=[[5, 6, 7], [8]], max_new_tokens=8, steps=4)
    assert len(batch) == 2 and all(len(r.output_ids) == 8 for r in batch)
    text = mosaic.MosaicEngine(engines["llada_text"], CONFIG).generate(inputs="the theory", max_new_tokens=8)
    assert text.text == engines["llada_text"].generate("the theory", gen_length=8, steps=8).text


def test_plan_defaults_to_max_seq_len(engines):
    engine = mosaic.MosaicEngine(engines["dream"], CONFIG)
    assert engine.plan()["tokens"] == 64


def test_max_seq_len_is_enforced_and_can_extend_the_context(engines):
    engine = mosaic.MosaicEngine(engines["llada"], CONFIG)
    with pytest.raises(ValueError, match="input 0 \\(60 tokens\\) \\+ max_new_tokens 8 exceeds max_seq_len 64"):
        engine.generate(inputs=[3] * 60, max_new_tokens=8)
    long = mosaic.MosaicEngine(engines["llada"], {**CONFIG, "max_seq_len": 5000})  # context 4096
    assert len(long.generate(inputs=[3] * 4090, max_new_tokens=8, steps=1).output_ids) == 8


@pytest.mark.parametrize("config, error, fragment", [
    ({"chunking_strategy": "eager"}, ValueError, "chunking_strategy 'eager' is not supported: Mosaic chunks lazily"),
    ({"logits_kernel": "full"}, ValueError, "logits_kernel 'full' is not supported"),
    ({"max_seq_length": 10}, ValueError, "unknown MosaicEngine option 'max_seq_length'"),
    ({"max_seq_len": 0}, ValueError, "max_seq_len must be positive"),
    ({"max_seq_len": "long"}, TypeError, "max_seq_len must be an int"),
    ([("max_seq_len", 4)], TypeError, "config must be a dict"),
])
def test_bad_config(engines, config, error, fragment):
    with pytest.raises(error) as raised:
        mosaic.MosaicEngine(engines["llada"], config)
    assert fragment in str(raised.value)


def test_bad_generate_arguments(models, engines):
    engine = mosaic.MosaicEngine(engines["llada"], CONFIG)
    with pytest.raises(TypeError, match="needs inputs="):
        engine.generate(max_new_tokens=8)
    with pytest.raises(TypeError, match="max_new_tokens or gen_length"):
        engine.generate(inputs=[5], max_new_tokens=8, gen_length=8)
    with pytest.raises(TypeError, match="unexpected keyword argument 'temp'"):
        engine.generate(inputs=[5], max_new_tokens=8, temp=1.0)
    with pytest.raises(ValueError, match="budget and device belong to the Engine"):
        mosaic.MosaicEngine(engines["llada"], {"budget": "1GiB"})
    with pytest.raises(FileNotFoundError):
        mosaic.MosaicEngine(models["llada"] + "-missing", CONFIG)
