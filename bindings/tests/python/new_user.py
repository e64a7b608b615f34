"""A new user's program, written from README.md alone ("Python: a million
devices in numpy"): a numpy simulation of 10^6 devices, one device's
ledger, and the server's estimate. Run against the installed wheel by
bindings/scripts/test-wheel.sh (numpy from PyPI); issue 23 requires it to
take under 5 s of Python time (CPU time of this process, printed with the
wall time). Closes with ``new-user: N passed, M failed``."""

import os
import sys
import time

WALL = time.perf_counter()

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the shared harness, also under -I
from harness import expect, finish, test  # noqa: E402

import numpy as np
from geopriv import BudgetPolicy, BudgetUnit, GeoMechanism, GeoprivError, GeoQuery, PrivacyLedger
from geopriv import ReportPolicy, ReportServer, ServerConfig

QUERY = GeoQuery.threshold(100_000.0, 20_000.0)  # "income above $100k", a ramp $20k wide
MECHANISM = GeoMechanism.polyplace_within(radius=5_000.0, level=1.0)  # level 1 within $5000: ε = 2e-4 per dollar


def simulate(incomes, seed=7):
    """Simulation: every income is one device's; all n release in one call (seeded: reproducible, NOT secure)."""
    releases = MECHANISM.seeded(seed).privatize_unmetered(QUERY, incomes)  # a ReleaseArray; .values is numpy
    server = ReportServer(ReportPolicy(max_epsilon=1e-3, max_delta=0.0).accept_seeded(), ServerConfig())
    batch = server.add_reports(releases)  # validated, clipped and aggregated exactly, in one call
    return server.estimates()[0], batch.rejected  # n, mean, standard_error, ci95 (and the clipping bound)


def device(income, ledger):
    """A real device: one release charged to its own ledger; None once the ledger is spent."""
    mechanism = MECHANISM.with_unit(BudgetUnit.PER_DOLLAR)
    try:
        return mechanism.privatize(ledger, QUERY, [income]).json  # upload this line
    except GeoprivError.BudgetExceeded as e:  # nothing was released or charged
        print("refused:", e.code)  # "budget-exceeded"
        return None


incomes = np.random.default_rng(1).lognormal(mean=11.2, sigma=0.5, size=1_000_000)
estimate, rejected = simulate(incomes)
ledger = PrivacyLedger.in_memory(BudgetPolicy(unit=BudgetUnit.PER_DOLLAR, total_epsilon=5e-4, total_delta=0.0))
uploads = [device(80_000.0, ledger) for _ in range(3)]  # the third does not fit 2 x 2e-4 + 2e-4 > 5e-4

# The checks (not in the README): the program above, imports included, is
# this process's CPU time so far.
cpu, wall = time.process_time(), time.perf_counter() - WALL
truth = float(np.clip((incomes - 100_000.0) / 20_000.0 + 0.5, 0.0, 1.0).mean())
print(f"new user: n = {estimate.estimate.n}, mean = {estimate.estimate.mean:.5f} ± "
      f"{estimate.estimate.standard_error:.5f} (truth {truth:.5f}); {cpu:.2f} s CPU, {wall:.2f} s wall")


@test("the simulation estimates the share of 10^6 devices within 5 standard errors")
def _():
    e = estimate.estimate
    expect(e.n == 1_000_000 and rejected == 0, (e.n, rejected))
    expect(abs(e.mean - truth) <= 5 * e.standard_error, (e.mean, truth, e.standard_error))


@test("the device's ledger pays two releases and refuses the third")
def _():
    expect(uploads[0] is not None and uploads[1] is not None and uploads[2] is None, uploads)
    expect(ledger.status().releases == 2, ledger.status())


@test("the whole program takes under 5 s of Python (CPU) time")
def _():
    expect(cpu < 5.0, f"{cpu:.2f} s CPU ({wall:.2f} s wall)")


finish("new-user")
