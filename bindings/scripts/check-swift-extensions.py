#!/usr/bin/env python3
"""Name check of the hand-written Swift extensions against the generated Swift.

There is no Swift toolchain in CI (issue 23 item 4), so the files under
bindings/extensions/swift are checked by name instead of compiled:

* every `extension T` extends a public type T of the generated file;
* every `case .C` (and `case .C(let a, ...)`) in a `switch self` of an
  extension of an enum names a case of that enum, with as many bindings as
  the case has associated values, and the switch covers every case (Swift
  refuses a non-exhaustive switch; a case added to the Rust error would
  otherwise break the Xcode build only);
* every `Type.member` / `.member(` an extension calls on a generated type
  exists in it.

Usage: check-swift-extensions.py GENERATED.swift EXTENSION.swift...
Prints one line per extension file; exits 1 naming what is missing.
Called by scripts/test-packages.sh ("Swift quick start matches the
generated bindings").
"""

import re
import sys


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def type_body(generated, name):
    """The kind and body (between its braces) of the public type `name`."""
    m = re.search(rf"\b(?:public|open)\s+(?:final\s+)?(enum|class|struct|protocol)\s+{name}\b[^{{]*\{{", generated)
    if not m:
        return None, ""
    depth, i = 1, m.end()
    while depth and i < len(generated):
        depth += {"{": 1, "}": -1}.get(generated[i], 0)
        i += 1
    return m.group(1), generated[m.end():i - 1]


def enum_cases(body):
    """case name -> number of associated values, at the top level of an enum body."""
    cases, depth = {}, 0
    for line in body.splitlines():
        if depth == 0:
            m = re.match(r"\s*case\s+`?(\w+)`?\s*(\((.*)\))?", line)
            if m:
                params = m.group(3)
                cases[m.group(1)] = 0 if params is None else len([p for p in params.split(",") if p.strip()])
        depth += line.count("{") - line.count("}")
    return cases


def check(generated, path):
    source = strip_comments(open(path).read())
    problems, checked = [], 0
    for m in re.finditer(r"\bextension\s+(\w+)\b[^{]*\{", source):
        name = m.group(1)
        kind, body = type_body(generated, name)
        checked += 1
        if kind is None:
            problems.append(f"{path}: extension {name}: no public type {name} in the generated Swift")
            continue
        # The extension's own body.
        depth, i = 1, m.end()
        while depth and i < len(source):
            depth += {"{": 1, "}": -1}.get(source[i], 0)
            i += 1
        ext = source[m.end():i - 1]
        if kind == "enum":
            cases = enum_cases(body)
            for sw in re.finditer(r"switch\s+self\s*\{", ext):
                used = {}
                for c in re.finditer(r"\bcase\s+\.(\w+)\s*(\(([^)]*)\))?\s*:", ext[sw.end():]):
                    binds = c.group(3)
                    used.setdefault(c.group(1), 0 if binds is None else len([b for b in binds.split(",") if b.strip()]))
                for c, n in used.items():
                    checked += 1
                    if c not in cases:
                        problems.append(f"{path}: case .{c} is not a case of {name} (cases: {sorted(cases)})")
                    elif n and n != cases[c]:
                        problems.append(f"{path}: case .{c} binds {n} values, {name}.{c} has {cases[c]}")
                if "default:" not in ext[sw.end():]:
                    for c in sorted(set(cases) - set(used)):
                        problems.append(f"{path}: switch over {name} misses case .{c} (Swift needs it exhaustive)")
        for call in re.finditer(rf"\b{name}\.(\w+)\b", ext):
            checked += 1
            if not re.search(rf"\b(func|var|let|case|init)\s+`?{call.group(1)}`?\b", body):
                problems.append(f"{path}: {name}.{call.group(1)} is not a member of the generated {name}")
    if checked == 0:
        problems.append(f"{path}: no extension found to check")
    return checked, problems


def main():
    generated = strip_comments(open(sys.argv[1]).read())
    failed = []
    for path in sys.argv[2:]:
        checked, problems = check(generated, path)
        failed += problems
        print(f"swift extension {path}: {checked} names checked against {sys.argv[1]}")
    if failed or len(sys.argv) < 3:
        sys.exit("error: " + ("\n".join(failed) or "no extension files given"))


if __name__ == "__main__":
    main()
