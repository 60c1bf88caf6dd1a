#!/usr/bin/python3
"""Every bad request of bad_requests.json against `mosaic serve` on a tiny LLaDA checkpoint: each
must get its status and an OpenAI error object whose param (an empty string in the table: null)
and message fragment are the table's, and the server must stay up and answer a good request after.

    /usr/bin/python3 tests/serve/check_bad_requests.py --mosaic build/src/cli/mosaic
"""

import argparse
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_harness as harness  # noqa: E402

TABLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bad_requests.json")


def check(server, case):
    """The problems with the server's answer to `case` (empty: it is right)."""
    if "raw" in case:
        status, _, body = server.request(case["method"], case["path"], raw=case["raw"])
    else:
        status, _, body = server.request(case["method"], case["path"], body=case.get("body"))
    problems = []
    if status != case["status"]:
        problems.append(f"status {status}, expected {case['status']}")
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict) or set(error) != {"message", "type", "param", "code"}:
        return problems + [f"not an OpenAI error object: {body!r}"[:300]]
    if "param" in case and (error["param"] or "") != case["param"]:
        problems.append(f"param {error['param']!r}, expected {case['param'] or None!r}")
    if "code" in case and error["code"] != case["code"]:
        problems.append(f"code {error['code']!r}, expected {case['code']!r}")
    if "fragment" in case and case["fragment"] not in error["message"]:
        problems.append(f"message {error['message']!r} lacks {case['fragment']!r}")
    return problems


# Bodies too large to write into the table: JSON nested 100,000 levels deep inside fields the
# server reads or quotes back (the response_format one ended the server by SIGSEGV: its value was
# dumped into the error message recursively).
DEEP = 100_000
GENERATED_CASES = [
    {"name": f"{path}: {where} nested {DEEP} levels deep", "method": "POST", "path": path,
     "raw": prefix + "[" * DEEP + "]" * DEEP + suffix, "status": 400, "param": "",
     "fragment": "nested deeper than 64 levels"}
    for path in ("/v1/completions", "/v1/chat/completions", "/generate", "/tokenize", "/detokenize")
    for where, prefix, suffix in (
        ("response_format", '{"model": "tiny", "prompt": "x", "response_format": {"type": "json", "a": ', "}}"),
        ("the prompt", '{"prompt": ', "}"))
]


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--mosaic", required=True)
    args = ap.parse_args(argv)
    with open(TABLE) as f:
        cases = json.load(f)["cases"] + GENERATED_CASES
    tmp = tempfile.mkdtemp(prefix="mosaic_bad_requests_")
    server = None
    try:
        tokenizer = os.path.join(tmp, "tokenizer.json")
        harness.write_tokenizer(tokenizer)
        model = harness.make_model(os.path.abspath(args.mosaic), os.path.join(tmp, "llada"), "llada", tokenizer)
        server = harness.Server(os.path.abspath(args.mosaic), model, "--model-name", "tiny")
        failures = 0
        for case in cases:
            problems = check(server, case)
            if problems:
                failures += 1
                print(f"FAIL  {case['name']}: {'; '.join(problems)}")
        status, _, body = server.post("/v1/completions", {"prompt": "still here", "max_tokens": 4, "steps": 4})
        if status != 200 or not server.alive():
            failures += 1
            print(f"FAIL  the server answers a good request after the table: {status} {body!r}"[:300])
        print(f"{len(cases) - failures} of {len(cases)} bad requests answered as the table says")
        return 1 if failures else 0
    finally:
        if server:
            server.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
