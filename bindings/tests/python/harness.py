"""The small test harness every Python suite of the bindings shares.

``@test("name")`` runs the decorated function at once and counts it as
passed or failed (a failure prints its traceback and the suite goes on);
``expect(condition, message)`` is an assertion with a message; and
``finish("label")`` prints ``label: P passed, F failed`` and exits 1 when
anything failed. ``GEOPRIV_TIMING=1`` prints each test's wall time;
``configure(progress=True)`` prints a line per passed test (the Spark suite,
whose tests take minutes).

The suites run under ``python -I`` against the installed wheel, where the
script's folder is not on ``sys.path``; they add it themselves before
importing this module.
"""

import os
import sys
import time
import traceback

_TALLY = {"passed": 0, "failed": 0}
_SETTINGS = {
    "progress": False,
    "traceback_limit": 3,
    "timing": os.environ.get("GEOPRIV_TIMING") is not None,
}


def configure(progress=False, traceback_limit=3):
    """Print a line per passed test (`progress`) and longer tracebacks."""
    _SETTINGS["progress"] = progress
    _SETTINGS["traceback_limit"] = traceback_limit


def test(name):
    """Decorator: run the function now and count it."""

    def run(body):
        t0 = time.perf_counter()
        try:
            body()
            _TALLY["passed"] += 1
            if _SETTINGS["progress"]:
                print(f"  ok {name} ({time.perf_counter() - t0:.0f} s)", flush=True)
        except Exception:  # noqa: BLE001 - a test harness reports everything
            _TALLY["failed"] += 1
            trace = traceback.format_exc(limit=_SETTINGS["traceback_limit"]).strip()
            print(f"FAIL {name}: {trace}", flush=True)
        if _SETTINGS["timing"]:
            print(f"  {1000 * (time.perf_counter() - t0):.0f} ms  {name}")
        return body

    return run


def expect(condition, message):
    """Raise AssertionError(message) unless `condition` holds."""
    if not condition:
        raise AssertionError(message)


def finish(label, extra=""):
    """Print the tally as ``label: P passed, F failed`` and exit (1 on failure)."""
    print(f"{label}: {_TALLY['passed']} passed, {_TALLY['failed']} failed{extra}")
    sys.exit(1 if _TALLY["failed"] else 0)
