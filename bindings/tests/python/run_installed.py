"""Runs a binding test suite against the *installed* ``geopriv`` package.

Usage (from bindings/scripts/test-wheel.sh, in a fresh virtual environment
where only the wheel is installed): ``python -I run_installed.py SUITE.py``.
The suites import the generated module by its source-tree name
``geopriv_ffi``; here that name is bound to the installed ``geopriv``
package (which re-exports the whole generated API), after checking that
``geopriv`` was imported from the environment's site-packages and not from
a checkout.
"""

import os
import runpy
import sys
import sysconfig

import geopriv

site = os.path.realpath(sysconfig.get_paths()["purelib"])
where = os.path.realpath(geopriv.__file__)
if not where.startswith(site + os.sep):
    sys.exit(f"error: geopriv was imported from {where}, not from the environment ({site})")
source = os.environ.get("GEOPRIV_SOURCE_TREE")
if source and any(os.path.realpath(p).startswith(os.path.realpath(source)) for p in sys.path if p):
    sys.exit(f"error: sys.path reaches into the source tree {source}: {sys.path}")

sys.modules["geopriv_ffi"] = geopriv
runpy.run_path(sys.argv[1], run_name="__main__")
