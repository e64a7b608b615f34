"""The Python quick start of README.md, run against the installed wheel by
bindings/scripts/test-wheel.sh. Closes with ``quickstart: N passed, M failed``."""

import os
import random
import sys
import tempfile

from geopriv import Aggregator, BudgetPolicy, BudgetUnit, GeoMechanism, GeoprivError, GeoQuery, PrivacyLedger, ReportPolicy

PER_DOLLAR = BudgetUnit.PER_DOLLAR()


def open_ledger(path):
    """Device: the user's lifetime budget, ε = 1/2500 per dollar, in a file created on first use."""
    return PrivacyLedger.open_or_create(path, BudgetPolicy(unit=PER_DOLLAR, total_epsilon=1 / 2500, total_delta=0.0))


def device(income, ledger):
    """Device: release "income above $100k" with ε = 1/5000 per dollar; None once the ledger is spent."""
    query = GeoQuery.threshold(100_000.0, 20_000.0)
    mechanism = GeoMechanism.polyplace(1 / 5000).with_unit(PER_DOLLAR)
    try:
        return mechanism.privatize(ledger, query, [income]).json  # charged first; upload this line
    except GeoprivError.BudgetExceeded:  # nothing was released or charged
        return None


def server(uploads):
    """Server: validate every upload against a policy and aggregate exactly."""
    policy, total, rejected = ReportPolicy(1 / 1000, 0.0), Aggregator(), {}
    for line in uploads:
        try:
            total.add_report(policy.accept_json(line))
        except GeoprivError.InvalidReport as e:  # the message ends with "[code]"
            code = str(e).rsplit("[", 1)[-1].rstrip("]")
            rejected[code] = rejected.get(code, 0) + 1
    return total.estimate(), rejected  # n, mean, standard_error, ci95_low, ci95_high


if __name__ == "__main__":
    rnd = random.Random(14)
    incomes = [60_000 + 100_000 * rnd.random() * rnd.random() for _ in range(4000)]
    per_device = BudgetPolicy(unit=PER_DOLLAR, total_epsilon=1 / 2500, total_delta=0.0)
    uploads = [device(x, PrivacyLedger.in_memory(per_device)) for x in incomes]
    with tempfile.TemporaryDirectory() as tmp:
        ledger = open_ledger(os.path.join(tmp, "ledger"))
        first = [device(1.0, ledger), device(1.0, ledger)]
        del ledger
        third = device(1.0, open_ledger(os.path.join(tmp, "ledger")))  # reopened from the file
    checks = [all(u is not None for u in uploads), all(u is not None for u in first) and third is None]
    estimate, rejected = server(uploads + ["{not json", ""])
    truth = sum(min(1.0, max(0.0, (x - 100_000) / 20_000 + 0.5)) for x in incomes) / len(incomes)
    checks += [rejected == {"malformed": 1, "empty": 1} and estimate.n == len(incomes),
               abs(estimate.mean - truth) <= 5 * estimate.standard_error]
    failed = checks.count(False)
    if failed:
        print(f"FAIL quickstart: checks {checks}, estimate {estimate}, truth {truth}, rejected {rejected}")
    print(f"quickstart: {len(checks) - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)
