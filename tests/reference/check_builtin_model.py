#!/usr/bin/python3
"""The built-in model end to end: `mosaic generate` with no --model (models/kjv-llada-12m)
against the independent NumPy reference (reference_forward.py + generate_np.py, float64).

    /usr/bin/python3 tests/reference/check_builtin_model.py --mosaic build/src/cli/mosaic

Mosaic tokenizes a prompt with the model's tokenizer.json and generates greedily (LLaDA
low-confidence remasking, semi-autoregressive blocks); the reference generates from the same
prompt ids and must give the same ids token for token. The answer must be English text the
corpus could have produced (letters, spaces, punctuation). Exit status 0 when all pass.
"""

import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import generate_np as gen  # noqa: E402
import reference_forward as ref  # noqa: E402

MODEL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "models", "kjv-llada-12m")
CASES = [  # prompt, gen_length, steps, block_length
    ("And it came to pass", 32, 32, 16),
    ("The LORD is my", 24, 12, 24),
]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mosaic", required=True)
    args = parser.parse_args()
    model = ref.load_model(MODEL)
    ids = gen.special_ids_from_folder(MODEL)
    env = {k: v for k, v in os.environ.items() if k != "MOSAIC_DEFAULT_MODEL"}  # the built-in lookup
    failures = 0
    for prompt, gen_length, steps, block in CASES:
        run = subprocess.run([args.mosaic, "generate", "--prompt", prompt, "--gen-length", str(gen_length),
                              "--steps", str(steps), "--block-length", str(block), "--device", "cpu", "--json",
                              "--quiet"], capture_output=True, text=True, timeout=300, env=env)
        if run.returncode != 0:
            print(f"FAIL {prompt!r}: mosaic exited {run.returncode}: {run.stderr.strip()}")
            failures += 1
            continue
        got = json.loads(run.stdout)["results"][0]
        params = gen.Params(gen_length=gen_length, steps=steps, block_length=block)
        expected = gen.generate_llada(model, got["prompt_ids"], params, ids)
        text = got["text"]
        english = all(c.isalpha() or c in " ,.;:'!?-()\n" for c in text) and len(text.split()) >= 3
        ok = got["output_ids"] == expected.output_ids and english
        failures += not ok
        same = sum(a == b for a, b in zip(got["output_ids"], expected.output_ids))
        print(f"{'ok  ' if ok else 'FAIL'} {prompt!r}: {same}/{gen_length} tokens as the NumPy reference; "
              f"text {'looks like English' if english else 'is not plain English'}: {prompt}{text!r}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
