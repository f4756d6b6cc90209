"""Every artifact is released under the one version in VERSION.

    python3 packaging/version.py check     fail naming each manifest that disagrees
    python3 packaging/version.py set 0.2.0 write the version into VERSION and every manifest

Each manifest keeps its own format, so the version is found by a pattern that
must match the expected number of times: a manifest reshaped so that its
version is no longer found fails `check` instead of going stale.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VERSION = re.compile(r"\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?")

# (manifest, pattern whose second group is the version, matches expected)
PLACES = [
    ("Cargo.toml", r'(\[workspace\.package\]\nversion = ")([^"]*)(")', 1),
    ("Cargo.lock", r'(name = "ctxkernel(?:-host|-fuzz-harness)?"\nversion = ")([^"]*)(")', 3),
    ("host-shims/python/pyproject.toml", r'(\nversion = ")([^"]*)(")', 1),
    ("host-shims/node/package.json", r'(\n  "version": ")([^"]*)(")', 1),
    ("host-shims/node/package-lock.json", r'(\n  "version": "|\n    "": \{\n      "name": "ctxkernel",\n      "version": ")([^"]*)(")', 2),
    ("host-shims/jvm/pom.xml", r'(<artifactId>ctxkernel</artifactId>\n  <version>)([^<]*)(</version>)', 1),
    # The examples depend on the packages of this checkout.
    ("examples/jetbrains-plugin/pom.xml", r'(<groupId>dev\.ctxkernel</groupId>\n      <artifactId>ctxkernel</artifactId>\n      <version>)([^<]*)(</version>)', 1),
    ("examples/vscode-extension/package-lock.json", r'("\.\./\.\./host-shims/node": \{\n      "name": "ctxkernel",\n      "version": ")([^"]*)(")', 1),
    ("examples/electron-app/package-lock.json", r'("\.\./\.\./host-shims/node": \{\n      "name": "ctxkernel",\n      "version": ")([^"]*)(")', 1),
]


def current() -> str:
    version = (ROOT / "VERSION").read_text().strip()
    if not VERSION.fullmatch(version):
        sys.exit(f"VERSION holds {version!r}, not a version like 1.2.3")
    return version


def check() -> int:
    version, wrong = current(), []
    for path, pattern, count in PLACES:
        found = [m.group(2) for m in re.finditer(pattern, (ROOT / path).read_text())]
        if len(found) != count:
            wrong.append(f"{path}: the version was found {len(found)} times, expected {count}")
        wrong += [f"{path}: {v} (VERSION is {version})" for v in found if v != version]
    for line in wrong:
        print(line, file=sys.stderr)
    return 1 if wrong else 0


def set_version(version: str) -> int:
    if not VERSION.fullmatch(version):
        sys.exit(f"{version!r} is not a version like 1.2.3")
    if check():
        sys.exit("the manifests disagree already: fix them before setting a new version")
    for path, pattern, count in PLACES:
        file = ROOT / path
        text, n = re.subn(pattern, lambda m: m.group(1) + version + m.group(3), file.read_text())
        assert n == count
        file.write_text(text)
    (ROOT / "VERSION").write_text(version + "\n")
    return check()


if __name__ == "__main__":
    match sys.argv[1:]:
        case ["check"]:
            sys.exit(check())
        case ["set", version]:
            sys.exit(set_version(version))
        case _:
            sys.exit(__doc__)
