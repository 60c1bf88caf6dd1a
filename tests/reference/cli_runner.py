"""Running the `mosaic` CLI from the cross-implementation checks: one call, its stdout, and a
CheckFailure carrying the command's output when it fails or hangs."""

import subprocess

COMMAND_TIMEOUT_S = 120


class CheckFailure(Exception):
    """A failed check; the message is the report."""


def run_command(argv):
    """Run argv, return stdout; raise CheckFailure with its output on error or timeout."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise CheckFailure(f"timed out after {COMMAND_TIMEOUT_S} s: {' '.join(argv)}")
    except OSError as e:
        raise CheckFailure(f"cannot run {argv[0]}: {e}")
    if proc.returncode != 0:
        raise CheckFailure(f"exit status {proc.returncode}: {' '.join(argv)}\n"
                           f"--- stdout ---\n{proc.stdout[-3000:]}\n"
                           f"--- stderr ---\n{proc.stderr[-3000:]}")
    return proc.stdout
