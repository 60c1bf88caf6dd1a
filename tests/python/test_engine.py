"""Opening a model folder: what Engine reports, and the exceptions for what users get wrong."""

import json
import os
import re
import shutil

import pytest

import mosaic


def test_info_describes_the_checkpoint(engines):
    info = engines["llada"].info
    assert info["family"] == "llada"
    assert info["architecture"] == "LLaDAModelLM"
    assert (info["layers"], info["hidden"], info["vocab"]) == (1, 64, 1024)
    assert info["mask_token_id"] == 1000
    assert info["device"] == "cpu" and engines["llada"].device == "cpu"
    assert info["weight_bytes"] > 0
    assert engines["dream"].info["family"] == "dream"
    assert "llada" in repr(engines["llada"]) and "cpu" in repr(engines["llada"])


def test_budget_accepts_bytes_and_sizes(models):
    assert mosaic.Engine(models["llada"], device="cpu", budget="64MiB").budget == 64 * 2**20
    assert mosaic.Engine(models["llada"], device="cpu", budget=10**9).budget == 10**9
    assert mosaic.parse_byte_size("24GiB") == 24 * 2**30
    assert mosaic.parse_byte_size("80GB") == 80 * 10**9
    assert mosaic.parse_byte_size("1.5k") == 1536


@pytest.mark.parametrize("budget, error, fragment", [
    ("lots", ValueError, "'lots' is not a size"),
    ("24XB", ValueError, "is not a size"),
    (0, ValueError, "out of range"),
    (-5, ValueError, "out of range"),
    (2.5e9, TypeError, "budget must be an int (bytes) or a string"),
    (True, TypeError, "budget must be"),
])
def test_bad_budget(models, budget, error, fragment):
    with pytest.raises(error, match=re.escape(fragment)):
        mosaic.Engine(models["llada"], budget=budget)


def test_budget_smaller_than_the_weights(models):
    with pytest.raises(mosaic.Error, match="alone exceed the budget"):
        mosaic.Engine(models["llada"], device="cpu", budget="1KiB")


def test_streamed_layers_are_refused_on_the_cpu_and_outside_the_model(models):
    with pytest.raises(mosaic.Error, match="the CPU backend holds every weight in host memory already"):
        mosaic.Engine(models["llada"], device="cpu", streamed_layers=1)
    with pytest.raises(mosaic.Error, match=r"streamed layers 99: the model has \d+ decoder layers"):
        mosaic.Engine(models["llada"], device="cpu", streamed_layers=99)
    with pytest.raises(TypeError, match="streamed_layers must be an int"):
        mosaic.Engine(models["llada"], device="cpu", streamed_layers="2")
    with pytest.raises(ValueError, match="streamed_layers must be >= 0"):
        mosaic.Engine(models["llada"], device="cpu", streamed_layers=-1)


def test_streamed_layers_auto_is_the_default_and_streams_nothing_on_the_cpu(models):
    engine = mosaic.Engine(models["llada"], device="cpu")
    assert engine.streamed_layers == "auto"
    assert engine.info["streamed_layers"] == 0 and engine.info["streamed_weight_bytes"] == 0


@pytest.mark.parametrize("device, error, fragment", [
    ("tpu", ValueError, "device 'tpu' is not supported"),
    ("cuda:x", ValueError, "is not supported"),
    (0, TypeError, "device must be a string"),
])
def test_bad_device(models, device, error, fragment):
    with pytest.raises(error, match=fragment):
        mosaic.Engine(models["llada"], device=device)


def test_missing_files_raise_file_not_found(models, tmp_path):
    with pytest.raises(FileNotFoundError, match="model folder not found") as missing:
        mosaic.Engine(tmp_path / "nowhere")
    assert missing.value.filename == str(tmp_path / "nowhere")

    copy = tmp_path / "copy"
    shutil.copytree(models["llada"], copy)
    os.remove(copy / "model.safetensors")
    with pytest.raises(FileNotFoundError, match="no model.safetensors or model.safetensors.index.json"):
        mosaic.Engine(copy)
    os.remove(copy / "config.json")
    with pytest.raises(FileNotFoundError, match="no config.json"):
        mosaic.Engine(copy)
    with pytest.raises(NotADirectoryError):
        mosaic.Engine(os.path.join(models["llada"], "config.json"))
    with pytest.raises(TypeError, match="model_dir must be a path"):
        mosaic.Engine(42)


def test_missing_shard_raises_file_not_found(tmp_path):
    sharded = mosaic.make_test_model(tmp_path / "sharded", layers=1, hidden=64, heads=2, ffn=96, vocab=1024,
                                     shards=2, seed=1)
    with open(os.path.join(sharded, "model.safetensors.index.json")) as f:
        shard = sorted(set(json.load(f)["weight_map"].values()))[-1]
    os.remove(os.path.join(sharded, shard))
    with pytest.raises(FileNotFoundError, match="shard named by model.safetensors.index.json") as missing:
        mosaic.Engine(sharded)
    assert missing.value.filename.endswith(shard)


def test_damaged_checkpoint_is_a_mosaic_error(models, tmp_path):
    copy = tmp_path / "damaged"
    shutil.copytree(models["llada"], copy)
    weights = copy / "model.safetensors"
    os.truncate(weights, os.path.getsize(weights) - 1000)
    with pytest.raises(mosaic.Error, match="model.safetensors: tensor .* lies outside the file's data section"):
        mosaic.Engine(copy)
    assert issubclass(mosaic.Error, ValueError)


def test_tokenizer_round_trip(engines):
    engine = engines["llada_text"]
    assert engine.has_tokenizer
    ids = engine.encode("the theory")
    assert engine.decode(ids) == "the theory"
    chat = engine.encode("hi", chat=True)
    assert len(chat) > len(engine.encode("hi"))
    with pytest.raises(mosaic.Error, match="no tokenizer.json"):
        engines["llada"].decode([1, 2])
    with pytest.raises(mosaic.Error, match="no tokenizer.json"):
        engines["llada"].encode("hello")
    with pytest.raises(TypeError):
        engine.encode(b"bytes")


def test_make_test_model_errors(tmp_path):
    with pytest.raises(mosaic.Error, match="unknown family 'gpt'"):
        mosaic.make_test_model(tmp_path / "m", family="gpt")
    with pytest.raises(FileNotFoundError, match="tokenizer.json not found"):
        mosaic.make_test_model(tmp_path / "m", tokenizer=tmp_path / "absent.json")


def test_tensor_parallel_ranks_give_the_one_rank_results(models):
    # 2 heads, FFN 96 and vocabulary 1024 split over 2 CPU ranks (threads): the same logits
    # within fp32 rounding of the reordered sums, the same greedy tokens.
    one = mosaic.Engine(models["llada"], device="cpu")
    two = mosaic.Engine(models["llada"], device="cpu", tensor_parallel=2)
    assert two.tensor_parallel == 2
    ids = [3, 17, 999, 5, 42, 7]
    want, got = one.forward(ids, [0, 2, 5]), two.forward(ids, [0, 2, 5])
    assert got.shape == want.shape == (3, 1024)
    assert abs(got - want).max() <= 1e-4 * abs(want).max()
    request = dict(gen_length=8, block_length=8, steps=8)
    assert two.generate([3, 17, 999], **request).output_ids == one.generate([3, 17, 999], **request).output_ids


def test_tensor_parallel_refusals_name_the_value(models):
    with pytest.raises(mosaic.Error, match="2 attention heads do not divide into 3 equal parts"):
        mosaic.Engine(models["llada"], device="cpu", tensor_parallel=3)
    with pytest.raises(ValueError, match="tensor_parallel must be >= 1"):
        mosaic.Engine(models["llada"], device="cpu", tensor_parallel=0)
    with pytest.raises(TypeError, match="tensor_parallel must be an int"):
        mosaic.Engine(models["llada"], device="cpu", tensor_parallel="2")
