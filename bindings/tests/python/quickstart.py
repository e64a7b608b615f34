"""The Python quick start of README.md, run against the installed wheel by
bindings/scripts/test-wheel.sh. Closes with ``quickstart: N passed, M failed``."""

import random
import sys

from geopriv import Aggregator, GeoMechanism, GeoprivError, GeoQuery, PrivacyBudget, ReportPolicy


def device(income, budget):
    """Device: release "income above $100k" with ε = 1/5000 per dollar; None once the budget is spent."""
    query, mechanism = GeoQuery.threshold(100_000.0, 20_000.0), GeoMechanism.polyplace(1 / 5000)
    try:
        return mechanism.privatize_with_budget(budget, query, [income]).json  # upload this line
    except GeoprivError.BudgetExceeded:
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
    uploads = [device(x, PrivacyBudget(1 / 2500, 0.0)) for x in incomes]
    spent = PrivacyBudget(1 / 5000, 0.0)
    checks = [all(u is not None for u in uploads), device(1.0, spent) is not None and device(1.0, spent) is None]
    estimate, rejected = server(uploads + ["{not json", ""])
    truth = sum(min(1.0, max(0.0, (x - 100_000) / 20_000 + 0.5)) for x in incomes) / len(incomes)
    checks += [rejected == {"malformed": 1, "empty": 1} and estimate.n == len(incomes),
               abs(estimate.mean - truth) <= 5 * estimate.standard_error]
    failed = checks.count(False)
    if failed:
        print(f"FAIL quickstart: checks {checks}, estimate {estimate}, truth {truth}, rejected {rejected}")
    print(f"quickstart: {len(checks) - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)
