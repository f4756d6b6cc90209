"""The compiled core module, cached per user so a process after the first
starts in milliseconds instead of compiling the kernel again (about two
seconds).

An entry is named by what its machine code depends on: the component's
sha256, the wasmtime-py version, the OS, the machine and the pointer size.
It holds a digest of the compiled bytes, checked before wasmtime sees them,
because wasmtime runs what it deserializes without checking it: a truncated
or damaged entry is compiled again and replaced, never loaded. wasmtime
refuses an entry compiled for CPU features this machine lacks, and that is a
rebuild too (so machines of different CPUs sharing one cache directory
rebuild each other's entries; give each its own). The cache is used only
while its directory belongs to this user and no one else may write to it,
since whoever writes an entry chooses the code this process runs. Entries
are written to a temporary file and renamed into place, so concurrent
processes only ever read a whole entry; a process killed while writing
leaves its temporary file, and entries of components no longer installed
stay until the directory is cleared. A cache that cannot be used costs the
compile time, nothing else.

`CTXKERNEL_CACHE_DIR` moves the cache; set to the empty string, it turns the
cache off. The Rust host keeps its own entries (of the whole component) the
same way.
"""

from __future__ import annotations

import hashlib
import logging
import os
import platform
import stat
import struct
import sys
import tempfile
from importlib.metadata import PackageNotFoundError, version
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


def entry_name(component_sha256: str) -> Optional[str]:
    """The entry's file name, or None when the wasmtime-py version cannot be
    known (a bundle without package metadata): then nothing is cached."""
    try:
        wasmtime = version("wasmtime")
    except PackageNotFoundError:
        return None
    bits = struct.calcsize("P") * 8
    return f"{component_sha256}-wasmtime-py-{wasmtime}-{sys.platform}-{platform.machine()}-{bits}.bin"


def load(engine: Engine, core: bytes, component_sha256: str) -> Module:
    """The compiled module for `core` (the core module of the component
    named by `component_sha256`): from the cache when a sound entry is
    there, else compiled and stored."""
    where, name = cache_dir(), entry_name(component_sha256)
    if where is None or name is None:
        return Module(engine, core)
    if not _private(where, must_exist=False):
        return Module(engine, core)
    path = where / name
    module = _read(engine, path)
    if module is None:
        module = Module(engine, core)
        _write(path, module)
    return module


def _private(where: Path, *, must_exist: bool) -> bool:
    """Whether `where` belongs to this user and only this user may write to
    it (on systems with owners and modes)."""
    try:
        status = where.stat()
    except FileNotFoundError:
        return not must_exist
    except OSError as e:
        log.warning("cannot use the compiled-module cache %s: %s", where, e)
        return False
    if not hasattr(os, "geteuid"):
        return True
    if status.st_uid != os.geteuid() or status.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        log.warning("not using the compiled-module cache %s: it belongs to another user or others may write to it", where)
        return False
    return True


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


def _write(path: Path, module: Module) -> None:
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not _private(path.parent, must_exist=True):
            return
        compiled = module.serialize()
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
    except Exception as e:  # noqa: BLE001 — an OSError, or wasmtime failing to serialize: either way, no entry
        log.warning("cannot write the compiled-module cache entry %s: %s", path, e)
