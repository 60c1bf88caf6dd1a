#!/usr/bin/python3
"""The OpenAI Node SDK conformance test (openai_client/conformance.mjs) against `mosaic serve` on a
tiny LLaDA checkpoint with a byte-level tokenizer.

    /usr/bin/python3 tests/serve/run_openai_client.py --mosaic build/src/cli/mosaic [--client-dir DIR]

The SDK is installed by tests/serve/openai_client/install.sh (into .cache/openai-client by
default). Without it the test skips (exit 77), unless MOSAIC_REQUIRE_OPENAI_CLIENT=1, which makes
its absence a failure (CI).
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import serve_harness as harness  # noqa: E402

SKIP = 77


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--mosaic", required=True)
    ap.add_argument("--client-dir", default=os.path.join(HERE, "..", "..", ".cache", "openai-client"))
    args = ap.parse_args(argv)
    client_dir = os.path.abspath(args.client_dir)
    node = shutil.which("node")
    installed = os.path.exists(os.path.join(client_dir, "node_modules", "openai", "package.json"))
    if not node or not installed:
        why = "node is not installed" if not node else f"the openai package is not installed in {client_dir}"
        if os.environ.get("MOSAIC_REQUIRE_OPENAI_CLIENT") == "1":
            print(f"FAIL: {why} (run tests/serve/openai_client/install.sh)")
            return 1
        print(f"SKIP: {why} (run tests/serve/openai_client/install.sh)")
        return SKIP
    tmp = tempfile.mkdtemp(prefix="mosaic_openai_client_")
    server = None
    try:
        tokenizer = os.path.join(tmp, "tokenizer.json")
        harness.write_tokenizer(tokenizer)
        mosaic = os.path.abspath(args.mosaic)
        model = harness.make_model(mosaic, os.path.join(tmp, "llada"), "llada", tokenizer)
        server = harness.Server(mosaic, model, "--model-name", "tiny")
        proc = subprocess.run([node, os.path.join(HERE, "openai_client", "conformance.mjs"), "--client-dir", client_dir,
                               "--base-url", f"http://127.0.0.1:{server.port}/v1", "--model", "tiny"], timeout=240)
        if not server.alive():
            print("FAIL: the server died:\n" + "".join(server.log))
            return 1
        return proc.returncode
    finally:
        if server:
            server.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
