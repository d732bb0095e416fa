#!/usr/bin/env python3
"""Checks every link of the book's sources (docs/src) and of the README: a relative link names a file or folder
that exists (in the book or the repository), and a `#fragment` names a heading of the page it
points to (mdBook's ids: lower case, spaces to `-`, other punctuation dropped). Links to other
sites are not followed (CI has no internet); they are listed with --external. Exits 1 naming
every broken link."""

import os
import re
import sys

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "src")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def prose(text):
    """The text outside code blocks and code spans."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def ids(path):
    seen, found = {}, set()
    text = re.sub(r"^```.*?^```", "", open(path, encoding="utf-8").read(), flags=re.S | re.M)
    for line in text.splitlines():
        m = re.match(r"^#+ (.*)", line)
        if not m:
            continue
        slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        found.add(slug if n == 0 else f"{slug}-{n}")
    return found


def main():
    broken, external = [], set()
    repo = os.path.dirname(os.path.dirname(SRC))
    pages = [os.path.join(root, name) for root, _, files in os.walk(SRC) for name in files]
    for page in sorted(p for p in pages if p.endswith(".md")) + [os.path.join(repo, "README.md")]:
        root, where = os.path.dirname(page), os.path.relpath(page, repo)
        for target in LINK.findall(prose(open(page, encoding="utf-8").read())):
            if re.match(r"^[a-z]+:", target):
                external.add(target)
                continue
            path, _, fragment = target.partition("#")
            resolved = os.path.normpath(os.path.join(root, path)) if path else page
            if not os.path.exists(resolved):
                broken.append(f"{where}: {target} (no such file)")
            elif fragment and resolved.endswith(".md") and fragment not in ids(resolved):
                broken.append(f"{where}: {target} (no such heading)")
    if "--external" in sys.argv:
        print("\n".join(sorted(external)))
    if broken:
        print("broken links:\n  " + "\n  ".join(broken), file=sys.stderr)
        sys.exit(1)
    print(f"links of the book and the README: all resolve ({len(external)} external ones not followed)")


main()
