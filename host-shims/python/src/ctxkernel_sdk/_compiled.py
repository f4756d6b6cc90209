"""The compiled core module, cached per user so a process after the first
starts in milliseconds instead of compiling the kernel again (about two
seconds).

An entry is named by what its machine code depends on: the component's
sha256, the wasmtime version and the machine. It holds a digest of the
compiled bytes, checked before wasmtime sees them, because wasmtime runs
what it deserializes without checking it: a truncated or damaged entry is
compiled again and replaced, never loaded. wasmtime still refuses an entry
built for another engine or CPU, and that is a rebuild too. Entries are
written to a temporary file and renamed into place, so concurrent processes
only ever read a whole entry. A cache that cannot be written (a read-only
home) costs the compile time, nothing else.

`CTXKERNEL_CACHE_DIR` moves the cache; set to the empty string, it turns the
cache off. The Rust host keeps the same entries in the same form.
"""

from __future__ import annotations

import hashlib
import logging
import os
import platform
import tempfile
from importlib.metadata import version
from pathlib import Path
from typing import Optional

from platformdirs import user_cache_dir
from wasmtime import Engine, Module

log = logging.getLogger("ctxkernel_sdk")

MAGIC = b"ctxkernel compiled module 1\n"
DIGEST = 32


def cache_dir() -> Optional[Path]:
    """Where entries live, or None when the cache is off."""
    configured = os.environ.get("CTXKERNEL_CACHE_DIR")
    if configured is not None:
        return Path(configured) if configured else None
    return Path(user_cache_dir("ctxkernel", appauthor=False))


def entry_name(component_sha256: str) -> str:
    return f"{component_sha256}-wasmtime-py-{version('wasmtime')}-{platform.machine()}.bin"


def load(engine: Engine, core: bytes, component_sha256: str) -> Module:
    """The compiled module for `core` (the core module of the component
    named by `component_sha256`): from the cache when a sound entry is
    there, else compiled and stored."""
    where = cache_dir()
    if where is None:
        return Module(engine, core)
    path = where / entry_name(component_sha256)
    module = _read(engine, path)
    if module is None:
        module = Module(engine, core)
        _write(path, module.serialize())
    return module


def _read(engine: Engine, path: Path) -> Optional[Module]:
    try:
        entry = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        log.warning("cannot read the compiled-module cache entry %s: %s", path, e)
        return None
    head = len(MAGIC) + DIGEST
    compiled = entry[head:]
    if entry[:len(MAGIC)] != MAGIC or entry[len(MAGIC):head] != hashlib.sha256(compiled).digest():
        log.warning("the compiled-module cache entry %s is damaged; compiling again", path)
        return None
    try:
        return Module.deserialize(engine, compiled)
    except Exception as e:  # noqa: BLE001 — wasmtime refuses an entry from another engine or CPU with a plain error
        log.warning("wasmtime refused the compiled-module cache entry %s (%s); compiling again", path, e)
        return None


def _write(path: Path, compiled: bytes) -> None:
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(MAGIC + hashlib.sha256(compiled).digest())
                out.write(compiled)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temporary, path)
        except BaseException:
            os.unlink(temporary)
            raise
    except OSError as e:
        log.warning("cannot write the compiled-module cache entry %s: %s", path, e)
