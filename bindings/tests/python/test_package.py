"""Tests of the installed ``geopriv`` wheel as a package (not its API,
which test_bindings.py covers): run by bindings/scripts/test-wheel.sh in a
fresh virtual environment holding only the wheel. Closes with
``python-wheel: N passed, M failed``."""

import importlib.metadata
import os
import subprocess
import sys
import sysconfig

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the shared harness, also under -I
from harness import expect, finish, test  # noqa: E402

import geopriv





PACKAGE = os.path.dirname(os.path.realpath(geopriv.__file__))


@test("installed from the wheel into this environment's site-packages")
def _():
    site = os.path.realpath(sysconfig.get_paths()["purelib"])
    expect(PACKAGE == os.path.join(site, "geopriv"), f"{PACKAGE} is not under {site}")
    source = os.environ.get("GEOPRIV_SOURCE_TREE")
    if source:
        expect(not PACKAGE.startswith(os.path.realpath(source)), f"{PACKAGE} is in the checkout")
    dist = importlib.metadata.distribution("geopriv")
    files = {str(f) for f in dist.files}
    expect("geopriv/__init__.py" in files and "geopriv/spark.py" in files, sorted(files))


@test("the version is the crate's, in the metadata, __version__ and the native library")
def _():
    expected = os.environ.get("GEOPRIV_EXPECTED_VERSION")
    meta = importlib.metadata.version("geopriv")
    expect(meta == geopriv.__version__ == geopriv.library_version(), (meta, geopriv.__version__))
    if expected:
        expect(meta == expected, f"{meta} != crate version {expected}")


@test("the native library ships inside the package and is the one loaded")
def _():
    native = os.path.join(PACKAGE, "_native")
    libs = [f for f in os.listdir(native) if f.startswith("libgeopriv_ffi")]
    expect(libs == ["libgeopriv_ffi.so"] or libs == ["libgeopriv_ffi.dylib"], libs)
    with open(f"/proc/{os.getpid()}/maps") as maps:  # Linux: which file is mapped
        mapped = {line.split()[-1] for line in maps if "libgeopriv_ffi" in line}
    expect(mapped == {os.path.join(native, libs[0])}, mapped)


@test("type hints: PEP 561 marker and annotated signatures")
def _():
    expect(os.path.isfile(os.path.join(PACKAGE, "py.typed")), "py.typed missing")
    hints = geopriv.ReportPolicy.accept_json.__annotations__
    expect(hints.get("line") in (str, "str") and "return" in hints, hints)
    hints = geopriv.GeoQuery.threshold.__annotations__
    expect(set(hints) == {"threshold", "width", "return"}, hints)


@test("the public names: the generated API and __all__")
def _():
    for name in ["GeoQuery", "GeoMechanism", "ReportPolicy", "Aggregator", "GridAggregator",
                 "PrivacyLedger", "BudgetPolicy", "BudgetUnit", "Projection", "GeoprivError", "library_version", "project"]:
        expect(name in geopriv.__all__ and hasattr(geopriv, name), name)
    q = geopriv.GeoQuery.threshold(100_000.0, 20_000.0)
    expect(q.query_id() == "threshold:T=100000;w=20000", q.query_id())


@test("geopriv.spark imports without pyspark; its clipping is the server's")
def _():
    import geopriv.spark as spark

    expect(spark.rejection_code(Exception("bad thing [malformed]")) == "malformed", "code")
    expect(spark._clip_hook(None) is None and spark._clip_hook(spark.ServerSpec(clip=False)) is None, "no clipping")
    query = geopriv.GeoQuery.threshold(100_000.0, 20_000.0)
    line = geopriv.GeoMechanism.polyplace(1e-4).privatize_unmetered(query, [90_000.0]).json
    report = geopriv.ReportPolicy(1e-3, 0.0).accept_json(line)
    clip = spark._clip_hook(spark.ServerSpec())
    bound = geopriv.ServerConfig().clip_bound(report)
    expect(clip(report) == min(max(report.value, bound.lower), bound.upper), "clamped into B")
    report.value = 1e4  # a forged value: clamped to the upper end of B
    expect(clip(report) == bound.upper < 1e4, (bound.upper, clip(report)))
    try:
        spark.ServerSpec(clip="yes").build()
        raise AssertionError("clip='yes' accepted")
    except ValueError:
        pass
    a, b = geopriv.Aggregator(), geopriv.Aggregator()
    a.add_values([0.5, 0.25])
    b.add_value(0.125)
    both = geopriv.Aggregator()
    both.add_values([0.5, 0.25, 0.125])
    expect(spark.merge_partials([a.to_json(), b.to_json()]) == both.to_json(), "tree merge")
    expect(spark.mechanism_str(geopriv.MechanismName.STUDENT_T) == "student-t", "CLI mechanism names")
    expect(not spark.PolicySpec().accept_seeded and spark._skippable("\ufeff  # note") and spark._skippable(" \r"),
           "seeded reports refused by default; blank and # rows skipped")
    expect(not spark._skippable("{") and not spark._skippable("\x0b"), "only ASCII whitespace (as the CLI) is blank")


@test("a second interpreter imports the package from any directory")
def _():
    out = subprocess.run(
        [sys.executable, "-I", "-c", "import geopriv; print(geopriv.GeoMechanism.polyplace(0.5).epsilon())"],
        cwd="/", capture_output=True, text=True, check=True,
    )
    expect(out.stdout.strip() == "0.5", out)


finish("python-wheel")
