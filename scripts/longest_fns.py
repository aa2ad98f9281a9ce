#!/usr/bin/env python3
"""List the longest Rust functions of the given crate directories (or files).

Usage: scripts/longest_fns.py [--over N] [--top N] PATH...
  PATH     a crate directory (its .rs files, recursively; target/ skipped)
           or a .rs file
  --over N only functions longer than N lines (default: all)
  --top N  at most N lines of output (default 20; 0: no limit)

A function's length counts the lines from its `fn` line to the line of its
closing brace, both included (its doc comment and attributes are not
counted). Braces inside strings, characters and comments are skipped.
Exit status 1 when --over is given and some function exceeds it, so the
script can gate CI: `scripts/longest_fns.py --over 120 crates/probes`.
"""
import argparse
import os
import re
import sys

FN = re.compile(
    r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:default\s+)?(?:const\s+)?(?:async\s+)?"
    r"(?:unsafe\s+)?(?:extern\s+\"[^\"]*\"\s+)?fn\s+([A-Za-z_][A-Za-z0-9_]*)"
)


def code_only(text):
    """The text with strings, chars and comments blanked (newlines kept)."""
    out = []
    i, n = 0, len(text)
    depth = 0  # nested block comments
    while i < n:
        c = text[i]
        nxt = text[i + 1] if i + 1 < n else ""
        if depth:
            if c == "*" and nxt == "/":
                depth -= 1
                out.append("  ")
                i += 2
            elif c == "/" and nxt == "*":
                depth += 1
                out.append("  ")
                i += 2
            else:
                out.append("\n" if c == "\n" else " ")
                i += 1
        elif c == "/" and nxt == "/":
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c == "/" and nxt == "*":
            depth = 1
            out.append("  ")
            i += 2
        elif c == "r" and re.match(r'r#*"', text[i:i + 10]) and not (
            i and (text[i - 1].isalnum() or text[i - 1] == "_")
        ):
            m = re.match(r'r(#*)"', text[i:])
            end = text.find('"' + m.group(1), i + len(m.group(0)))
            end = n if end < 0 else end + 1 + len(m.group(1))
            out.append("".join("\n" if ch == "\n" else " " for ch in text[i:end]))
            i = end
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append("".join("\n" if ch == "\n" else " " for ch in text[i:j + 1]))
            i = j + 1
        elif c == "'":
            # a char literal ('a', '\n', '\u{..}'), else a lifetime
            m = re.match(r"'(?:\\(?:u\{[0-9a-fA-F]+\}|x[0-9a-fA-F]{2}|.)|[^\\'])'", text[i:])
            if m:
                out.append(" " * len(m.group(0)))
                i += len(m.group(0))
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(path):
    """(length, line, name) of every function with a body in the file."""
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = code_only(f.read()).split("\n")
    found = []
    for start, line in enumerate(lines):
        m = FN.match(line)
        if not m:
            continue
        depth, opened = 0, False
        for end in range(start, len(lines)):
            for ch in lines[end]:
                if ch == "{":
                    depth += 1
                    opened = True
                elif ch == "}":
                    depth -= 1
                elif ch == ";" and not opened and depth == 0:
                    break  # a declaration without a body (trait, extern)
            else:
                if opened and depth == 0:
                    found.append((end - start + 1, start + 1, m.group(1)))
                    break
                continue
            break
    return found


def rust_files(path):
    if os.path.isfile(path):
        yield path
        return
    for root, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if d not in ("target", ".git"))
        for f in sorted(files):
            if f.endswith(".rs"):
                yield os.path.join(root, f)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--over", type=int, default=None)
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("paths", nargs="+")
    args = ap.parse_args()
    rows = []
    for p in args.paths:
        if not os.path.exists(p):
            sys.exit(f"longest_fns: {p}: no such file or directory")
        for f in rust_files(p):
            rows += [(n, f, line, name) for n, line, name in functions(f)]
    rows.sort(key=lambda r: (-r[0], r[1], r[2]))
    if args.over is not None:
        rows = [r for r in rows if r[0] > args.over]
    shown = rows if args.top == 0 else rows[: args.top]
    for n, f, line, name in shown:
        print(f"{n:5}  {f}:{line}  {name}")
    if args.top and len(rows) > len(shown):
        print(f"  ... {len(rows) - len(shown)} more (--top 0 lists all)")
    if args.over is not None and rows:
        sys.exit(1)


if __name__ == "__main__":
    main()
