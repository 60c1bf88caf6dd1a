#!/usr/bin/python3
"""Cross-implementation test of infilling (docs/design/infilling.md): `mosaic generate --suffix`
vs the NumPy reference (generate_np.py with a suffix), token for token.

    /usr/bin/python3 tests/reference/check_infill.py --mosaic build/src/cli/mosaic --workdir /tmp/infill

Tiny random LLaDA and Dream checkpoints (`mosaic make-test-model`) with a byte-level tokenizer
whose ids 0-255 are the bytes, so the suffix text's ids are its bytes, known without Mosaic's
tokenizer. The canvas is prompt + gen_length masks + suffix; every case compares the generated
span and the step count. The cases Mosaic refuses (a KV cache, CFG) must exit 1 naming the suffix.

Exit status 0 when every case passes, 1 otherwise.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "serve"))
from cli_runner import CheckFailure, run_command  # noqa: E402
import generate_np as gen  # noqa: E402
import reference_forward as ref  # noqa: E402
import serve_harness  # noqa: E402  (the byte-level tokenizer)

SUFFIX = " and so it ends."
PROMPT = [72, 101, 108, 108, 111, 44]  # "Hello,"

# (name, family, mosaic flags, reference Params fields)
CASES = [
    ("llada one block", "llada", dict(gen_length=8, steps=8), {}),
    ("llada blocks", "llada", dict(gen_length=12, steps=6, block_length=4), dict(block_length=4)),
    ("llada sampled", "llada", dict(gen_length=8, steps=4, temperature=0.8, seed=3), dict(temperature=0.8, seed=3)),
    ("llada random remasking", "llada", dict(gen_length=8, steps=4, remasking="random", seed=5),
     dict(remasking="random", seed=5)),
    ("llada threshold", "llada", dict(gen_length=8, steps=8, threshold=0.01), dict(threshold=0.01)),
    ("dream origin", "dream", dict(gen_length=8, steps=8, seed=2), dict(seed=2)),
    ("dream entropy", "dream", dict(gen_length=8, steps=4, alg="entropy"), dict(alg="entropy")),
    ("dream blocks", "dream", dict(gen_length=8, steps=8, block_length=4, alg="maskgit_plus"),
     dict(block_length=4, alg="maskgit_plus")),
]

REFUSED = [
    ("llada dual cache", "llada", dict(gen_length=8, steps=8, block_length=4, cache="dual"), "without a KV cache"),
    ("llada cfg", "llada", dict(gen_length=8, steps=8, cfg_scale=1.5), "cfg_scale"),
]


def flags(options):
    out = []
    for key, value in options.items():
        out += ["--" + key.replace("_", "-"), str(value)]
    return out


def mosaic_generate(mosaic, model, options, suffix):
    argv = [mosaic, "generate", "--model", model, "--ids", ",".join(map(str, PROMPT)), "--suffix", suffix,
            "--json", "--quiet"] + flags(options)
    return json.loads(run_command(argv))["results"][0]


def reference(model_dir, model, options, extra, suffix_ids):
    params = gen.Params(gen_length=options["gen_length"], steps=options["steps"], **extra)
    ids = gen.special_ids_from_folder(model_dir)
    return gen.generate(model, PROMPT, params, ids, suffix_ids)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--mosaic", required=True)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args(argv)
    shutil.rmtree(args.workdir, ignore_errors=True)
    os.makedirs(args.workdir)
    tokenizer = os.path.join(args.workdir, "tokenizer.json")
    serve_harness.write_tokenizer(tokenizer)
    folders = {family: serve_harness.make_model(args.mosaic, os.path.join(args.workdir, family), family, tokenizer,
                                                seed=seed)
               for family, seed in (("llada", 11), ("dream", 12))}
    models = {family: ref.load_model(folder) for family, folder in folders.items()}
    suffix_ids = list(SUFFIX.encode("utf-8"))
    failures = 0
    for name, family, options, extra in CASES:
        try:
            got = mosaic_generate(args.mosaic, folders[family], options, SUFFIX)
            want = reference(folders[family], models[family], options, extra, suffix_ids)
            if got["output_ids"] != want.output_ids or got["steps"] != want.steps:
                raise CheckFailure(f"mosaic {got['output_ids']} in {got['steps']} steps, reference "
                                   f"{want.output_ids} in {want.steps} steps")
            # The suffix is context: without it the same request decodes differently (else the
            # case would not show that the suffix was seen).
            alone = reference(folders[family], models[family], options, extra, [])
            if alone.output_ids == want.output_ids:
                raise CheckFailure("the answer is the same without the suffix: the case proves nothing")
            print(f"PASS  {name}")
        except CheckFailure as failure:
            failures += 1
            print(f"FAIL  {name}: {failure}")
    for name, family, options, fragment in REFUSED:
        argv = [args.mosaic, "generate", "--model", folders[family], "--ids", ",".join(map(str, PROMPT)),
                "--suffix", SUFFIX, "--json", "--quiet"] + flags(options)
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        if proc.returncode == 1 and "suffix" in proc.stderr and fragment in proc.stderr:
            print(f"PASS  {name} (refused: {proc.stderr.strip()})")
        else:
            failures += 1
            print(f"FAIL  {name}: exit {proc.returncode}, stderr {proc.stderr.strip()!r}")
    print(f"{len(CASES) + len(REFUSED) - failures} of {len(CASES) + len(REFUSED)} cases pass")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
