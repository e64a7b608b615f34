"""Several Python processes releasing through one ledger file (issue 19
item 1): every value released is charged, and the total never exceeds the
budget. Run by bindings/scripts/test-python.sh; plain ``python3``; closes
with ``python-ledger: N passed, M failed``."""

import multiprocessing
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the shared harness, also under -I
from harness import expect, finish, test  # noqa: E402

from geopriv_ffi import BudgetPolicy, BudgetUnit, GeoMechanism, GeoprivError, GeoQuery, PrivacyLedger  # noqa: E402


def policy(total):
    return BudgetPolicy(unit=BudgetUnit.PER_DOLLAR(), total_epsilon=total, total_delta=0.0)


def writer(args):
    """One process: `count` releases at `epsilon`; how many were released."""
    path, total, epsilon, count = args
    ledger = PrivacyLedger.open_or_create(path, policy(total))
    mechanism = GeoMechanism.polyplace(epsilon).with_unit(BudgetUnit.PER_DOLLAR())
    query = GeoQuery.threshold(100_000.0, 20_000.0)
    released = 0
    for _ in range(count):
        try:
            mechanism.privatize(ledger, query, [95_000.0])
            released += 1
        except GeoprivError.BudgetExceeded:
            pass
    return released


@test("processes x releases: released == recorded, the budget used exactly")
def many_processes():
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "ledger.json")
        with multiprocessing.get_context("fork").Pool(4) as pool:
            released = sum(pool.map(writer, [(path, 0.1, 1e-3, 30)] * 4))
        status = PrivacyLedger.open(path, policy(0.1)).status()
        expect(released == status.releases, f"released {released}, recorded {status.releases}")
        expect(released == 100, f"100 releases of 1e-3 fit 0.1 exactly, got {released}")
        expect(status.spent_epsilon <= 0.1 * (1 + 1e-15), f"spent {status.spent_epsilon}")


@test("two processes at different epsilons: only what is charged is released")
def two_epsilons():
    with tempfile.TemporaryDirectory() as tmp:
        with multiprocessing.get_context("fork").Pool(2) as pool:
            for trial in range(4):
                path = os.path.join(tmp, f"ledger{trial}.json")
                big, small = pool.map(writer, [(path, 0.1, 0.1, 1), (path, 0.1, 1e-4, 1)])
                status = PrivacyLedger.open(path, policy(0.1)).status()
                expect(big + small == 1 and status.releases == 1, f"trial {trial}: {big} {small}")
                expect(status.spent_epsilon == (0.1 if big else 1e-4), f"trial {trial}: {status}")


if __name__ == "__main__":
    finish("python-ledger")
