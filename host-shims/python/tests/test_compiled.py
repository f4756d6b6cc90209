"""The per-user cache of the compiled core module: a sound entry is loaded
instead of compiling, anything else is compiled again and replaced."""

import hashlib
import logging
import os
import platform
import subprocess
import sys

from importlib.metadata import version

import pytest
from wasmtime import Engine

from conftest import PLAN, append_request
from ctxkernel_sdk import COMPONENT_SHA256, Kernel, MemoryStore
from ctxkernel_sdk import _compiled as compiled
from ctxkernel_sdk._engine import Instance, core_module, packaged_component

CORE = core_module(packaged_component()[0])


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXKERNEL_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / compiled.entry_name(COMPONENT_SHA256)


def forbid_compiling(monkeypatch):
    """Makes compiling fail, so a load that succeeds came from the cache."""
    real = compiled.Module

    class CacheOnly:
        deserialize = staticmethod(real.deserialize)

        def __init__(self, *args):
            raise AssertionError("compiled although a sound cache entry was there")

    monkeypatch.setattr(compiled, "Module", CacheOnly)


def plan_with(engine, module):
    kernel = Kernel(MemoryStore())
    kernel._instance = Instance(engine, module, kernel.store)
    kernel.append_events(append_request(0, 40))
    return kernel.call("plan-context", PLAN)


def test_a_second_load_deserializes_the_entry_and_answers_as_a_compiled_module(cache, monkeypatch):
    engine = Engine()
    fresh = compiled.load(engine, CORE, COMPONENT_SHA256)
    assert cache.read_bytes().startswith(compiled.MAGIC)
    assert oct(cache.parent.stat().st_mode & 0o777) == "0o700"
    with monkeypatch.context() as m:
        forbid_compiling(m)
        second = Engine()
        cached = compiled.load(second, CORE, COMPONENT_SHA256)
    assert plan_with(second, cached) == plan_with(engine, fresh)
    assert [p.name for p in cache.parent.iterdir()] == [cache.name]


@pytest.mark.parametrize("damage", ["flip a code byte", "truncate", "flip the digest", "wrong magic", "empty", "header only"])
def test_a_damaged_entry_is_compiled_again_and_replaced(cache, caplog, damage):
    compiled.load(Engine(), CORE, COMPONENT_SHA256)
    good = cache.read_bytes()
    head = len(compiled.MAGIC) + compiled.DIGEST
    at = head + (len(good) - head) // 2
    cache.write_bytes({
        "flip a code byte": good[:at] + bytes([good[at] ^ 0x01]) + good[at + 1:],
        "truncate": good[:len(good) - 4096],
        "flip the digest": good[:len(compiled.MAGIC)] + bytes([good[len(compiled.MAGIC)] ^ 0x80]) + good[len(compiled.MAGIC) + 1:],
        "wrong magic": b"X" + good[1:],
        "empty": b"",
        "header only": good[:head],
    }[damage])
    with caplog.at_level(logging.WARNING, logger="ctxkernel_sdk"):
        engine = Engine()
        module = compiled.load(engine, CORE, COMPONENT_SHA256)
    assert "damaged" in caplog.text
    assert cache.read_bytes() == good
    other = Engine()
    assert plan_with(engine, module) == plan_with(other, compiled.load(other, CORE, COMPONENT_SHA256))


def test_an_entry_wasmtime_refuses_is_compiled_again(cache, caplog):
    # A sound digest over bytes that are no compiled module (as an entry from
    # another wasmtime or CPU would be, to this one): wasmtime's own check.
    cache.parent.mkdir(parents=True)
    garbage = b"\x7fELF" + bytes(range(256)) * 8
    cache.write_bytes(compiled.MAGIC + hashlib.sha256(garbage).digest() + garbage)
    with caplog.at_level(logging.WARNING, logger="ctxkernel_sdk"):
        compiled.load(Engine(), CORE, COMPONENT_SHA256)
    assert "refused" in caplog.text
    assert cache.read_bytes() != compiled.MAGIC + hashlib.sha256(garbage).digest() + garbage


def test_an_empty_setting_turns_the_cache_off(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXKERNEL_CACHE_DIR", "")
    monkeypatch.chdir(tmp_path)
    compiled.load(Engine(), CORE, COMPONENT_SHA256)
    assert compiled.cache_dir() is None and list(tmp_path.iterdir()) == []


def test_a_cache_that_cannot_be_written_costs_only_the_compile(tmp_path, monkeypatch, caplog):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("CTXKERNEL_CACHE_DIR", str(blocker / "cache"))
    with caplog.at_level(logging.WARNING, logger="ctxkernel_sdk"):
        engine = Engine()
        module = compiled.load(engine, CORE, COMPONENT_SHA256)
    assert "cannot use the compiled-module cache" in caplog.text
    assert plan_with(engine, module)


def test_an_entry_is_named_by_the_component_the_wasmtime_and_the_machine():
    name = compiled.entry_name(COMPONENT_SHA256)
    assert name == f"{COMPONENT_SHA256}-wasmtime-py-{version('wasmtime')}-{sys.platform}-{platform.machine()}-64.bin"
    assert compiled.entry_name("0" * 64) != name


def test_without_the_wasmtime_version_nothing_is_cached(cache, monkeypatch):
    def unknown(name):
        raise compiled.PackageNotFoundError(name)

    monkeypatch.setattr(compiled, "version", unknown)
    engine = Engine()
    assert plan_with(engine, compiled.load(engine, CORE, COMPONENT_SHA256))
    assert not cache.parent.exists()


def test_a_cache_others_may_write_to_is_not_used(cache, caplog, monkeypatch):
    compiled.load(Engine(), CORE, COMPONENT_SHA256)
    cache.parent.chmod(0o777)
    with caplog.at_level(logging.WARNING, logger="ctxkernel_sdk"):
        forged = cache.read_bytes()
        engine = Engine()
        module = compiled.load(engine, CORE, COMPONENT_SHA256)
    assert "others may write to it" in caplog.text
    assert plan_with(engine, module) and cache.read_bytes() == forged
    # Nor one that belongs to someone else.
    monkeypatch.setattr(compiled.os, "geteuid", lambda: os.getuid() + 1)
    cache.parent.chmod(0o700)
    forbid_compiling(monkeypatch)
    with pytest.raises(AssertionError, match="compiled although"):
        compiled.load(Engine(), CORE, COMPONENT_SHA256)


def test_a_write_that_fails_after_its_temporary_file_leaves_nothing_behind(cache, caplog):
    (cache / "in-the-way").mkdir(parents=True)  # a directory where the entry goes: the rename fails
    with caplog.at_level(logging.WARNING, logger="ctxkernel_sdk"):
        engine = Engine()
        module = compiled.load(engine, CORE, COMPONENT_SHA256)
    assert "cannot write" in caplog.text and plan_with(engine, module)
    assert [p.name for p in cache.parent.iterdir()] == [cache.name]


def test_processes_starting_together_share_one_whole_entry(tmp_path):
    env = {**os.environ, "CTXKERNEL_CACHE_DIR": str(tmp_path / "cache")}
    program = "from ctxkernel_sdk import Kernel; print(Kernel().info()['kernel']['name'])"
    processes = [subprocess.Popen([sys.executable, "-c", program], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(4)]
    outcomes = [p.communicate(timeout=300) for p in processes]
    assert [out for out, _ in outcomes] == [b"ctxkernel\n"] * 4, [err for _, err in outcomes]
    entries = sorted(p.name for p in (tmp_path / "cache").iterdir())
    assert entries == [compiled.entry_name(COMPONENT_SHA256)], "a temporary file was left behind"
    # The entry the race left is sound: a fresh process loads it without compiling.
    check = "import ctxkernel_sdk._compiled as c, wasmtime as w\n" \
        "class M:\n deserialize = staticmethod(w.Module.deserialize)\n def __init__(self, *a): raise SystemExit('compiled')\n" \
        "c.Module = M\nfrom ctxkernel_sdk import Kernel; Kernel().info()"
    subprocess.run([sys.executable, "-c", check], env=env, check=True, timeout=120)
