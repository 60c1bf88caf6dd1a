"""mosaic.Engine(..., adapter=...): a PEFT LoRA folder merged at load; logits equal to
`mosaic forward --adapter`'s, different from the base's, and a missing folder a FileNotFoundError."""

import os
import sys

import numpy as np
import pytest

import mosaic

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
import make_lora_adapter  # noqa: E402


@pytest.fixture(scope="module")
def adapter(models, tmp_path_factory):
    path = tmp_path_factory.mktemp("adapter") / "lora"
    make_lora_adapter.write_adapter(models["dream"], str(path), 4, 8, ["q_proj", "o_proj", "down_proj"], seed=2)
    return path


def test_adapter_agrees_with_cli(models, engines, adapter, cli, tmp_path):
    out = tmp_path / "adapted.npy"
    cli("forward", "--model", models["dream"], "--device", "cpu", "--adapter", adapter, "--ids", "5,6,1000,1000",
        "--logits-out", out)
    engine = mosaic.Engine(models["dream"], device="cpu", adapter=adapter)
    assert engine.info["adapted_projections"] == 3 and engine.info["adapter"] == str(adapter)
    assert engine.info["weight_bytes"] > engines["dream"].info["weight_bytes"]  # fp32 copies of bf16 weights
    logits = engine.forward([5, 6, 1000, 1000])
    np.testing.assert_array_equal(logits, np.load(out))
    assert np.max(np.abs(logits - engines["dream"].forward([5, 6, 1000, 1000]))) > 1e-3
    assert "adapter=" in repr(engine)


def test_adapter_errors(models, adapter, tmp_path):
    with pytest.raises(FileNotFoundError):
        mosaic.Engine(models["dream"], device="cpu", adapter=tmp_path / "absent")
    with pytest.raises(TypeError):
        mosaic.Engine(models["dream"], device="cpu", adapter=3)
    with pytest.raises(mosaic.Error, match="names no projection of this llada checkpoint"):
        mosaic.Engine(models["llada"], device="cpu", adapter=adapter)


def test_plan_counts_what_the_engine_loads(models, engines, adapter):
    # The planner's weight bytes against what the loaded engines report: the base alone, and with
    # the adapter's merged fp32 copies on the CPU.
    base = mosaic.plan(models["dream"], 64, device="cpu")
    adapted = mosaic.plan(models["dream"], 64, device="cpu", adapter=adapter)
    engine = mosaic.Engine(models["dream"], device="cpu", adapter=adapter)
    assert base["weight_bytes"] == engines["dream"].info["weight_bytes"]
    assert adapted["weight_bytes"] == engine.info["weight_bytes"]
    assert adapted["adapter"]["projections"] == 3 and adapted["adapter"]["rank"] == 4
    assert "adapter" not in base
    assert engine.plan(64)["weight_bytes"] == engine.info["weight_bytes"]
    assert mosaic.plan(models["dream"], 64, device="cuda", adapter=adapter)["adapter"]["merged_extra_bytes"] == 0
    with pytest.raises(mosaic.Error, match="names no projection of this llada checkpoint"):
        mosaic.plan(models["llada"], 64, device="cpu", adapter=adapter)
    with pytest.raises(TypeError):
        mosaic.plan(models["dream"], 64, device="cpu", adapter=3)
