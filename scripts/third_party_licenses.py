#!/usr/bin/env python3
"""The licences of every crate linked into the hoptrace binary, checked
against an allow list.

    scripts/third_party_licenses.py [--metadata FILE] [--out FILE.tsv]

The crates are those the binary links: from `cargo metadata` (run here,
`--locked --offline`, for x86_64 Linux, or read from FILE), the package
`hoptrace` and everything reachable from it through normal dependencies
(not dev-dependencies, whose code is in tests only, nor build-dependencies,
whose code runs at build time and is not linked). Each crate's `license`
field is an SPDX expression: `A OR B` is acceptable when either side is,
`A AND B` when both are, `A WITH exception` when A is; the legacy `/` means
OR. A crate whose expression no allowed licence satisfies, or that has no
`license` field, is reported and the exit status is 1.

--out writes the table shipped in the packages
(/usr/share/doc/hoptrace/third-party-licenses.tsv): crate, version,
licence, repository, one crate a line, sorted.

Why this and not cargo-deny or cargo-about: both are crates.io tools that
take minutes to compile on the two cores CI has, for the same check over
the same `cargo metadata`; this script needs only Python.
"""

import argparse
import json
import re
import subprocess
import sys

# Permissive licences whose terms the packages meet by shipping the table
# and the crates' notices in the binary's documentation.
ALLOWED = {
    "MIT", "MIT-0", "Apache-2.0", "BSD-2-Clause", "BSD-3-Clause", "ISC",
    "Zlib", "Unicode-3.0", "Unicode-DFS-2016", "Unlicense", "0BSD",
    "CC0-1.0", "BSL-1.0",
}
# Exceptions that only widen what the base licence allows.
ALLOWED_EXCEPTIONS = {"LLVM-exception"}


def tokens(expr):
    return re.findall(r"\(|\)|[^\s()]+", expr.replace("/", " OR "))


def acceptable(expr):
    """Whether the SPDX expression `expr` is satisfied by ALLOWED."""
    toks = tokens(expr)
    pos = 0

    def peek():
        return toks[pos] if pos < len(toks) else None

    def take():
        nonlocal pos
        pos += 1
        return toks[pos - 1]

    def primary():
        if peek() == "(":
            take()
            ok = disjunction()
            if take() != ")":
                raise ValueError(f"unbalanced parentheses in {expr!r}")
            return ok
        name = take()
        if name is None or name in ("AND", "OR", "WITH", ")"):
            raise ValueError(f"licence expected in {expr!r}")
        ok = name in ALLOWED
        if peek() == "WITH":
            take()
            ok = ok and take() in ALLOWED_EXCEPTIONS
        return ok

    def conjunction():
        ok = primary()
        while peek() == "AND":
            take()
            ok = primary() and ok
        return ok

    def disjunction():
        ok = conjunction()
        while peek() == "OR":
            take()
            ok = conjunction() or ok
        return ok

    result = disjunction()
    if pos != len(toks):
        raise ValueError(f"trailing {toks[pos:]} in {expr!r}")
    return result


def linked_packages(metadata, root_name="hoptrace"):
    """The packages reachable from `root_name` by normal dependencies."""
    by_id = {p["id"]: p for p in metadata["packages"]}
    nodes = {n["id"]: n for n in metadata["resolve"]["nodes"]}
    root = next(p["id"] for p in metadata["packages"] if p["name"] == root_name)
    seen, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        for dep in nodes[pid]["deps"]:
            if any(k["kind"] is None for k in dep["dep_kinds"]):
                todo.append(dep["pkg"])
    return [by_id[i] for i in seen]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--metadata", help="cargo metadata JSON (default: run cargo)")
    ap.add_argument("--out", help="write the TSV table here")
    args = ap.parse_args()
    if args.metadata:
        with open(args.metadata) as f:
            metadata = json.load(f)
    else:
        metadata = json.loads(subprocess.run(
            ["cargo", "metadata", "--format-version", "1", "--locked", "--offline",
             "--filter-platform", "x86_64-unknown-linux-gnu"],
            check=True, capture_output=True, text=True).stdout)
    third_party = [p for p in linked_packages(metadata) if p["source"] is not None]
    bad = []
    for p in third_party:
        lic = p.get("license")
        try:
            ok = bool(lic) and acceptable(lic)
        except ValueError as e:
            ok, lic = False, f"{lic} ({e})"
        if not ok:
            bad.append(f"{p['name']} {p['version']}: {lic or 'no license field'}")
    if args.out:
        with open(args.out, "w") as f:
            f.write("crate\tversion\tlicense\trepository\n")
            for p in sorted(third_party, key=lambda p: (p["name"], p["version"])):
                f.write(f"{p['name']}\t{p['version']}\t{p['license']}\t{p.get('repository') or ''}\n")
    if bad:
        print("licences outside the allow list (scripts/third_party_licenses.py ALLOWED):",
              file=sys.stderr)
        print("\n".join(bad), file=sys.stderr)
        return 1
    print(f"{len(third_party)} third-party crates linked, every licence allowed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
