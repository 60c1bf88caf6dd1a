"""What the command-line tests share: running `mosaic`, the one-line error they expect of it, and
their command line (`--mosaic PATH`).

    import cli_harness as harness
    status, out, err = harness.run("info", "--model", folder)
    harness.assert_error(self, status, err, "config.json", code=1)
"""

import argparse
import os
import subprocess
import sys

MOSAIC = None  # the binary under test, set by main()


def run(*args, timeout=120, env=None, **kwargs):
    """(status, stdout, stderr) of `mosaic ARGS`, decoded with undecodable bytes replaced. A run
    that a signal ends, or that outlives `timeout`, fails the test at once. One OpenMP thread:
    the tests run two at a time on two cores."""
    proc = subprocess.run([MOSAIC, *args], capture_output=True, timeout=timeout,
                          env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})}, **kwargs)
    if proc.returncode < 0:
        raise AssertionError(f"mosaic {' '.join(map(str, args))} was killed by signal {-proc.returncode}: "
                             f"{proc.stderr.decode(errors='replace')[-2000:]}")
    return proc.returncode, proc.stdout.decode(errors="replace"), proc.stderr.decode(errors="replace")


def assert_error(test, status, err, *fragments, code=1, what=""):
    """Exit status `code`, every fragment in stderr, and for code 1 (bad input) one line starting
    "mosaic: error: " (code 2 is CLI11's usage error, in its own format)."""
    test.assertEqual(status, code, f"{what}status {status}; stderr: {err}")
    for fragment in fragments:
        test.assertIn(fragment, err, what)
    if code == 1:
        test.assertTrue(err.startswith("mosaic: error: "), err)
        test.assertEqual(err.count("\n"), 1, "the error is one line: " + err)


def parse_args(*extra_options):
    """Parses --mosaic (and `extra_options`, e.g. "--corpus") from the command line, sets MOSAIC,
    and returns (options, the argv left for unittest.main)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--mosaic", required=True)
    for option in extra_options:
        parser.add_argument(option)
    options, rest = parser.parse_known_args()
    global MOSAIC
    MOSAIC = os.path.abspath(options.mosaic)
    return options, [sys.argv[0], *rest]
