"""The Python quick start of README.md, run against the installed wheel by
bindings/scripts/test-wheel.sh. Closes with ``quickstart: N passed, M failed``."""

import math
import os
import random
import sys
import tempfile
import time

from geopriv import Aggregator, BudgetPeriod, BudgetPolicy, BudgetUnit, GeoMechanism, GeoprivError, GeoQuery, PrivacyLedger, ReportPolicy
from geopriv import MapGrid, MapMechanism, MapRelease, MapServer
from geopriv import OutboxUploader, UploadVerdict

PER_DOLLAR = BudgetUnit.PER_DOLLAR


def open_ledger(path):
    """Device: ε = 1/2500 per dollar a day, at most 1/10 per dollar over the device's life, in a file created on first use."""
    daily = BudgetPeriod(seconds=86_400, epsilon=1 / 2500, delta=0.0)
    return PrivacyLedger.open_or_create(path, BudgetPolicy(unit=PER_DOLLAR, total_epsilon=0.1, total_delta=0.0, period=daily))


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
        except GeoprivError.InvalidReport as e:  # e.code: "malformed", "empty", ...
            rejected[e.code] = rejected.get(e.code, 0) + 1
    return total.estimate(), rejected  # n, mean, standard_error, ci95_low, ci95_high


CITY = MapGrid(x_min=0.0, x_max=20_000.0, y_min=0.0, y_max=20_000.0, points_x=21, points_y=21, bandwidth=None)


def map_device(location, ledger):
    """Device: release my location [x, y] (metres) for the whole map at ε = 1/1000 per metre, charged once."""
    try:
        return MapRelease(CITY, MapMechanism.A_PRIORI, 1e-3).release(ledger, location).json  # upload this
    except GeoprivError.BudgetExceeded:  # nothing was released or charged
        return None


def map_server(uploads):
    """Server: the map with per-cell standard errors; bad uploads are counted with their reason, never raised."""
    server = MapServer(CITY, MapMechanism.A_PRIORI, 1e-3)
    batch = server.add_all_json(uploads)  # batch.rejections: index, code, reason of each bad upload
    return server.estimate(None), batch.rejected  # values, standard_errors, xs, ys, per_device_epsilon


def region_device(geojson_text, location, ledger):
    """Device: "am I in the park?" (a GeoJSON feature in metres, ramp 10 m) at ε = 1/100 per metre, charged first."""
    query = GeoQuery.region_geojson(geojson_text, "park", 10.0)  # region_geojson_latlon for lon/lat
    mechanism = GeoMechanism.polyplace(1 / 100).with_unit(BudgetUnit.PER_METRE)
    try:
        return mechanism.privatize(ledger, query, location).json  # upload this; its query id is region:g=<digest>;w=10
    except GeoprivError.BudgetExceeded:  # nothing was released or charged
        return None


PARK = '{"type": "Feature", "id": "park", "properties": {}, "geometry": {"type": "Polygon", "coordinates": [[[0, 0], [200, 0], [200, 200], [0, 200], [0, 0]]]}}'
def device_to_outbox(income, ledger):
    """Device: release and keep the report in the ledger file's outbox (same write as its charge)."""
    mechanism = GeoMechanism.polyplace(1 / 5000).with_unit(BudgetUnit.PER_DOLLAR)
    mechanism.privatize_to_outbox(ledger, GeoQuery.threshold(100_000.0, 20_000.0), [income])


UPLOADER = OutboxUploader(100, 1 << 20, 1000, 300_000)  # batches of 100; retries after 1 s doubling to 5 min, jittered


def upload_outbox(ledger, post, uploader=UPLOADER):
    """Device (a background job): send the outbox with the app's own HTTP. post(body) returns
    (status, body bytes, Retry-After or None) of POST {collector}/v1/tasks/{task}/reports; status 0: no answer."""
    parked, attempt = [], 0
    while (batch := uploader.next_batch(ledger.pending_uploads(), parked)) is not None:
        status, body, retry_after = post(batch.body)
        verdict = uploader.classify(batch, status, body, retry_after)
        if isinstance(verdict, UploadVerdict.ANSWERED):  # stored: accepted now or before (a retry counts once)
            ledger.acknowledge(verdict.acknowledge)
            parked += [r.id for r in verdict.rejected]  # refused: out of the retry loop
            attempt = 0
        elif isinstance(verdict, UploadVerdict.RETRY) and attempt < 5:
            time.sleep(uploader.retry_delay_ms(attempt, verdict.after_ms) / 1000)
            attempt += 1
        else:  # FATAL, SPLIT or still failing: everything stays in the outbox for the next run
            return False
    return True


class _Collector:
    """A collector in memory: counts each report_id once; ``offline`` requests get no answer,
    ``lose`` answers are lost after storing."""

    def __init__(self, offline, lose):
        self.stored, self.offline, self.lose, self.requests = {}, offline, lose, 0

    def post(self, body):
        self.requests += 1
        if self.offline > 0:
            self.offline -= 1
            return 0, b"", None
        import json
        accepted, duplicates = 0, []
        for i, line in enumerate(body.splitlines()):
            rid = json.loads(line)["report_id"]
            if rid in self.stored:
                duplicates.append(i + 1)
            else:
                self.stored[rid], accepted = line, accepted + 1
        if self.lose > 0:
            self.lose -= 1
            return 0, b"", None
        answer = {"accepted": accepted, "duplicates": duplicates, "rejected": [], "period": 0}
        return 200, json.dumps(answer).encode(), None


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
    # The map: 2000 devices around one district, each with its own ledger of ε = 1/1000 per metre.
    per_metre = BudgetPolicy(unit=BudgetUnit.PER_METRE, total_epsilon=1e-3, total_delta=0.0)
    homes = [[rnd.gauss(8_000, 1_500), rnd.gauss(12_000, 1_500)] for _ in range(2000)]
    ledgers = [PrivacyLedger.in_memory(per_metre) for _ in homes]
    map_uploads = [map_device(home, ledger) for home, ledger in zip(homes, ledgers)]
    checks += [all(u is not None for u in map_uploads), map_device(homes[0], ledgers[0]) is None]
    estimate_map, map_rejected = map_server(map_uploads + ["{not json"])
    cell = estimate_map.xs.index(8_000.0) * len(estimate_map.ys) + estimate_map.ys.index(12_000.0)
    h2 = 2 * math.hypot(1_000.0, 1_000.0) ** 2  # 2 h², h = one cell diagonal
    map_truth = sum(math.exp(-((x - 8_000) ** 2 + (y - 12_000) ** 2) / h2) for x, y in homes) / len(homes)
    # A kernel map states an interval (5 SE + its discretisation bound). When the planner picks the EM
    # map its SE counts the noise only and no discretisation bound is stated (NaN): its intervals are
    # not calibrated yet (issue 22 item 2; -15 SE seen at n = 2000), so only closeness is checked.
    map_allowed = (0.1 if math.isnan(estimate_map.discretisation_bound)
                   else 5 * estimate_map.standard_errors[cell] + estimate_map.discretisation_bound)
    checks += [map_rejected == 1 and estimate_map.n == 2000 and estimate_map.per_device_epsilon == 1e-3,
               abs(estimate_map.values[cell] - map_truth) <= map_allowed]
    # The region: 1000 devices in and around a 200 m park, each with its own ledger of ε = 1/100 per metre.
    spots = [[rnd.uniform(-300, 500), rnd.uniform(-300, 500)] for _ in range(1000)]
    per_region = BudgetPolicy(unit=BudgetUnit.PER_METRE, total_epsilon=1 / 100, total_delta=0.0)
    region_uploads = [region_device(PARK, xy, PrivacyLedger.in_memory(per_region)) for xy in spots]
    park = GeoQuery.region_geojson(PARK, "park", 10.0)
    region_total = Aggregator()
    for u in region_uploads:
        region_total.add_report(ReportPolicy(1 / 100, 0.0).accept_json(u))
    region_estimate = region_total.estimate()
    assert region_estimate is not None and region_estimate.standard_error is not None  # 1000 reports
    region_truth = sum(park.value(xy) for xy in spots) / len(spots)
    digest = park.query_id().split("g=")[1].split(";")[0]  # the report carries the region's digest and width
    checks += [all(u is not None and digest in u for u in region_uploads) and region_estimate.n == 1000,
               abs(region_estimate.mean - region_truth) <= 5 * region_estimate.standard_error]
    # The outbox: 250 reports charged while offline, the app restarted, one answer lost: each counted once.
    with tempfile.TemporaryDirectory() as tmp:
        policy = BudgetPolicy(unit=PER_DOLLAR, total_epsilon=1.0, total_delta=0.0)
        ledger = PrivacyLedger.open_or_create(os.path.join(tmp, "ledger"), policy)
        for x in incomes[:250]:
            device_to_outbox(x, ledger)
        offline, fast = _Collector(offline=100, lose=0), OutboxUploader(100, 1 << 20, 1, 2)  # the test does not wait
        gave_up = upload_outbox(ledger, offline.post, fast) is False and len(ledger.pending_uploads()) == 250
        ledger = PrivacyLedger.open(os.path.join(tmp, "ledger"), policy)  # the app restarted
        collector = _Collector(offline=2, lose=1)
        done = upload_outbox(ledger, collector.post, fast)
        checks += [gave_up and offline.requests == 6, done and ledger.pending_uploads() == [],
                   len(collector.stored) == 250 and collector.requests == 6]
    failed = checks.count(False)
    if failed:
        print(f"FAIL quickstart: checks {checks}, estimate {estimate}, truth {truth}, rejected {rejected}")
    print(f"quickstart: {len(checks) - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)
