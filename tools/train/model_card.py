#!/usr/bin/python3
"""Markdown from a training run's results.json: the model card (model/README.md), the
samples file, and the results section of docs/default-model.md.

    /usr/bin/python3 tools/train/model_card.py --run $OUT/train --doc docs/default-model.md \
        [--model-dir models/<name>]

rewrites the part of the doc between `<!-- results:begin -->` and `<!-- results:end -->`
(and, with --model-dir, that folder's README.md) from the run's numbers.
"""

import argparse
import json
import os
import re

BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"


def _f(x, digits=3):
    return f"{x:.{digits}f}"


def quality_table(r):
    rows = ["| split | tokens | model masked-token CE | unigram masked-token CE | model ELBO loss "
            "| unigram ELBO loss | model bits/byte | unigram bits/byte |",
            "|---|---|---|---|---|---|---|---|"]
    for split, e in r["final_eval"].items():
        bpb = r["bits_per_byte"][split]
        rows.append(f"| {split} | {e['tokens']} | {_f(e['model']['masked_ce'])} "
                    f"(ppl {e['model']['masked_ppl']:.1f}) | {_f(e['unigram']['masked_ce'])} "
                    f"(ppl {e['unigram']['masked_ppl']:.1f}) | {_f(e['model']['elbo'])} "
                    f"| {_f(e['unigram']['elbo'])} | {_f(bpb['model'])} | {_f(bpb['unigram'])} |")
    return "\n".join(rows)


def by_t_table(r):
    e = r["final_eval"]["validation"]
    head = "| masking ratio t | " + " | ".join(f"{t:.2f}" for t in e["t"][::2]) + " |"
    sep = "|---|" + "---|" * len(e["t"][::2])
    model = "| model CE | " + " | ".join(_f(x, 2) for x in e["model"]["by_t"][::2]) + " |"
    uni = "| unigram CE | " + " | ".join(_f(x, 2) for x in e["unigram"]["by_t"][::2]) + " |"
    return "\n".join([head, sep, model, uni])


def training_table(r):
    t, h, a = r["training"], r["hyperparameters"], r["architecture"]
    rows = [
        ("parameters", f"{r['parameters']:,} ({r['parameters'] / 1e6:.2f} M)"),
        ("layers / d_model / heads / MLP", f"{a['n_layers']} / {a['d_model']} / {a['n_heads']} "
                                           f"(head dim {a['d_model'] // a['n_heads']}) / {a['mlp_hidden_size']}"),
        ("vocabulary / context", f"{a['vocab_size']} / {a['max_sequence_length']}"),
        ("steps (planned)", f"{t['steps']} ({t['planned_steps']}), stopped by {t['stopped_by']}"),
        ("tokens seen / epochs", f"{t['tokens_seen'] / 1e6:.1f} M / {t['epochs']:.1f}"),
        ("batch", f"{h['batch_size']} x {h['seq_len']} tokens (every {h['short_every']}th step "
                  f"{h['batch_size'] * 4} x {h['seq_len'] // 4})" if h["short_every"]
         else f"{h['batch_size']} x {h['seq_len']} tokens"),
        ("optimiser", f"AdamW lr {h['lr']:g} (warm-up {h['warmup_steps']}, cosine to "
                      f"{h['min_lr_ratio']:g}x), betas ({h['beta1']}, {h['beta2']}), "
                      f"weight decay {h['weight_decay']}, clip {h['grad_clip']}, dropout {h['dropout']}"),
        ("exported checkpoint", f"step {t['best_step']} (best validation loss)"),
        ("training wall time", f"{t['train_seconds']:.0f} s (+ {t['compile_seconds']:.0f} s "
                               f"warm-up/compile, compiled: {t['compiled']})"),
        ("whole run", f"{r['wall_seconds']:.0f} s on {r['environment']['device']}, "
                      f"torch {r['environment']['torch']}"),
        ("exported size", f"{r['export']['total_bytes'] / 1e6:.2f} MB"),
    ]
    hf = r.get("hf_tokenizers_check", {})
    if hf.get("checked"):
        rows.append(("HF tokenizers check", f"{hf['chapters']} chapters + {hf['extra_texts']} "
                                            f"texts, {hf['mismatch_count']} mismatches "
                                            f"(tokenizers {hf['tokenizers_version']})"))
    return "| | |\n|---|---|\n" + "\n".join(f"| {k} | {v} |" for k, v in rows)


def samples_text(samples):
    out = []
    for setting in dict.fromkeys(setting_of(s) for s in samples):
        rows = [s for s in samples if setting_of(s) == setting]
        out.append(f"## {describe(rows[0])} (prompt|generated)\n")
        out += [f"{s['prompt']}|{s['text']}\n" for s in rows]
    return "\n".join(out)


def setting_of(s):
    return (s["temperature"], s["block_length"], s["seed"])


def describe(s):
    kind = "greedy" if s["temperature"] == 0 else f"temperature {s['temperature']}, seed {s['seed']}"
    return (f"{kind}, gen_length {s['gen_length']}, steps {s['steps']}, block_length "
            f"{s['block_length']}")


def samples_markdown(samples, setting=None):
    """One bullet per prompt for one setting (default: the first)."""
    setting = setting or setting_of(samples[0])
    rows = [s for s in samples if setting_of(s) == setting]
    return "\n".join(f"- **{s['prompt']}**{_md(s['text'])}" for s in rows)


def all_samples_markdown(samples):
    parts = []
    for setting in dict.fromkeys(setting_of(s) for s in samples):
        first = next(s for s in samples if setting_of(s) == setting)
        parts.append(f"{describe(first)}:\n\n{samples_markdown(samples, setting)}")
    return "\n\n".join(parts)


def _md(text):
    return text.replace("\n", " ").replace("*", "\\*").replace("_", "\\_")


def results_section(r):
    return "\n\n".join([
        "Generated from the run's `results.json` by `tools/train/model_card.py`.",
        "Held-out quality (nats per token unless stated; lower is better; the unigram "
        "baseline predicts every masked token from training-set frequencies, scored on the "
        "same masked positions):",
        quality_table(r),
        "Masked-token cross-entropy on the validation split by masking ratio (t = 1 is no "
        "context at all; the model should then be close to the unigram baseline):",
        by_t_table(r),
        "Training:",
        training_table(r),
        "Samples (tools/train/sample.py, LLaDA's low-confidence remasking, on the exported "
        "bf16 weights; prompt in bold, output cut at the first EOS as Mosaic does). "
        "The last three prompts are not in the Bible. "
        + all_samples_markdown(r["samples"]),
    ])


def card(r):
    a = r["architecture"]
    corpus = r["data"]["corpus"]
    pkgs = ", ".join(f"{k} {v}" for k, v in corpus["source"]["debian_packages"].items())
    return f"""# Mosaic default model: a small LLaDA trained on the King James Bible

A {r['parameters'] / 1e6:.1f} M-parameter masked diffusion language model with the exact
architecture, tensor names and config.json of LLaDA-8B ({a['n_layers']} layers, d_model
{a['d_model']}, {a['n_heads']} heads, SwiGLU {a['mlp_hidden_size']}, RoPE, RMSNorm,
bidirectional attention, no biases, untied head), trained by the Mosaic project so that
`mosaic generate` works without downloading a checkpoint. It writes King-James-style
English; it knows nothing else and is not an assistant.

- Data: {corpus['corpus']}, from the Debian packages {pkgs}. {corpus['source']['license']}
- Split by book: validation {', '.join(corpus['split_rule']['validation'])}; test
  {', '.join(corpus['split_rule']['test'])}; everything else is training data.
- Tokenizer: byte-level BPE ({a['vocab_size']} ids: 256 bytes, merges, `<|endoftext|>` =
  {a['eos_token_id']}, `<|mdm_mask|>` = {a['mask_token_id']}), trained on the training
  split by the project (`tools/train/byte_bpe.py`). No BOS; chapters end with EOS.
- Context: {a['max_sequence_length']} tokens (prompt + generated).
- Reproduce: `tools/train/README.md` in the Mosaic repository.

## Quality

{quality_table(r)}

Samples ({describe(r['samples'][0])}, low-confidence remasking; prompt in bold):

{samples_markdown(r['samples'])}

## Use

```sh
mosaic generate --model <this folder> --prompt "And it came to pass" --gen-length 64 --steps 64
```

Other LLaDA code can load it too: config.json names `configuration_llada.py` /
`modeling_llada.py` in `auto_map` as LLaDA-8B does; those files are not included.

License: the training text is in the public domain; the weights are released with the
Mosaic repository under its terms.
"""


def update_doc(doc_path, section):
    with open(doc_path, encoding="utf-8") as f:
        text = f.read()
    pattern = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.S)
    if not pattern.search(text):
        raise SystemExit(f"{doc_path}: no {BEGIN} ... {END} section")
    text = pattern.sub(lambda _: f"{BEGIN}\n{section}\n{END}", text)
    with open(doc_path, "w", encoding="utf-8") as f:
        f.write(text)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--run", required=True)
    parser.add_argument("--doc")
    parser.add_argument("--model-dir")
    args = parser.parse_args()
    with open(os.path.join(args.run, "results.json"), encoding="utf-8") as f:
        r = json.load(f)
    if args.doc:
        update_doc(args.doc, results_section(r))
    if args.model_dir:
        with open(os.path.join(args.model_dir, "README.md"), "w", encoding="utf-8") as f:
            f.write(card(r))


if __name__ == "__main__":
    main()
