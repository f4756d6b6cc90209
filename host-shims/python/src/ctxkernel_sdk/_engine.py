"""The kernel's core module under wasmtime's core API, with the slice of the
Component Model's canonical ABI its WIT needs written out here (as the JVM
host does).

wasmtime-py's component API converts a `list<u8>` one element at a time and
meters each element as host-call fuel, so store values and content over about
2.7 MB trapped and smaller ones crossed at well under 1 MB/s. Here bytes cross
the boundary as one memory copy each way.
"""

from __future__ import annotations

import hashlib
import struct
import sys
from functools import lru_cache
from importlib.resources import files
from typing import Any, Callable, Optional, Protocol, Union, cast

from wasmtime import Caller, Engine, Func, Linker, Memory, Module, Store as WasmStore

from . import _compiled as compiled
from ._errors import ERROR_CODES
from ._stores import Entry, StoreConflict, StoreError

STORE = "ctxkernel:kernel/store@0.1.0"
INTERFACE = "ctxkernel:kernel/kernel@0.1.0#"

Context = Union[WasmStore, Caller]


class Port(Protocol):
    def get(self, key: str) -> Optional[Entry]: ...
    def scan(self, prefix: str, start_after: str, limit: int) -> list[Entry]: ...
    def put(self, key: str, value: bytes, expected: Optional[int]) -> int: ...
    def remove(self, key: str, expected: Optional[int]) -> None: ...


def core_module(component: bytes) -> bytes:
    """The first core module in `component`: the kernel's code. The other two
    are indirections that let imports be wired before the main module's
    memory exists, which this host does in Python."""
    if component[:8] != b"\x00asm\x0d\x00\x01\x00":
        raise ValueError("not a WebAssembly component (wrong preamble)")
    at = 8
    while at < len(component):
        section = component[at]
        size, shift, at = 0, 0, at + 1
        while True:
            byte = component[at]
            at += 1
            size |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        if section == 1:
            return component[at:at + size]
        at += size
    raise ValueError("the component holds no core module")


#: The sha256 of the one component this package ships (as `sha256sum build/ctxkernel.wasm` prints it).
COMPONENT_SHA256: str = files("ctxkernel_sdk").joinpath("ctxkernel.wasm.sha256").read_text().split()[0]


def packaged_component() -> tuple[bytes, str]:
    """The component this package ships and its sha256, checked against the
    digest written beside it when the package was built: a truncated or
    swapped file fails here rather than as a trap in some later call."""
    component = files("ctxkernel_sdk").joinpath("ctxkernel.wasm").read_bytes()
    digest = hashlib.sha256(component).hexdigest()
    if digest != COMPONENT_SHA256:
        raise RuntimeError(f"the packaged ctxkernel.wasm has sha256 {digest}, but the package was built with {COMPONENT_SHA256}: reinstall ctxkernel-sdk")
    return component, digest


@lru_cache(maxsize=None)
def runtime(path: Optional[str]) -> tuple[Engine, Module, str]:
    """The engine, the compiled core module and the sha256 of a component file
    (None: the packaged one), once per process."""
    if path:
        component = open(path, "rb").read()
        digest = hashlib.sha256(component).hexdigest()
    else:
        component, digest = packaged_component()
    engine = Engine()
    return engine, compiled.load(engine, core_module(component), digest), digest


def _i32(value: int) -> int:
    """An address as wasmtime-py passes an i32: signed."""
    return value - (1 << 32) if value >= 1 << 31 else value


class Instance:
    """One instance of the kernel's core module over a host store."""

    def __init__(self, engine: Engine, module: Module, port: Port, memory_limit: Optional[int] = None) -> None:
        self._port = port
        self.wasm = WasmStore(engine)
        if memory_limit is not None:
            self.wasm.set_limits(memory_size=memory_limit)
        handlers: dict[tuple[str, str], Callable[..., Any]] = {
            (STORE, "get"): self._get,
            (STORE, "scan"): self._scan,
            (STORE, "put"): self._put,
            (STORE, "remove"): self._remove,
            **_wasi(),
        }
        linker = Linker(engine)
        for imported in module.imports:
            handler = handlers[(imported.module, imported.name or "")]
            linker.define_func(imported.module, imported.name or "", imported.type, handler, access_caller=True)  # type: ignore[arg-type]
        exports = linker.instantiate(self.wasm, module).exports(self.wasm)
        self._exports = exports
        self._memory = cast(Memory, exports["memory"])
        self._realloc = cast(Func, exports["cabi_realloc"])

    def call(self, command: str, *args: bytes) -> tuple[Optional[bytes], Optional[tuple[str, str, str]]]:
        """Runs one export: (ok bytes, None) or (None, (code, message, detail))."""
        params: list[int] = []
        for arg in args:
            params += self._lower(self.wasm, arg)
        ret = cast(int, self._func(INTERFACE + command)(self.wasm, *params)) & 0xFFFFFFFF
        tag, = self._unpack(self.wasm, "<B", ret)
        if tag == 0:
            ok: Optional[bytes] = self._list(self.wasm, ret + 4)
            err = None
        else:
            code, = self._unpack(self.wasm, "<B", ret + 4)
            ok, err = None, (ERROR_CODES[code], self._list(self.wasm, ret + 8).decode(), self._list(self.wasm, ret + 16).decode())
        self._func("cabi_post_" + INTERFACE + command)(self.wasm, _i32(ret))
        return ok, err

    def _func(self, name: str) -> Func:
        return cast(Func, self._exports[name])

    # ---- memory

    def _unpack(self, ctx: Context, layout: str, at: int) -> tuple[Any, ...]:
        return struct.unpack(layout, self._memory.read(ctx, at, at + struct.calcsize(layout)))

    def _pack(self, ctx: Context, at: int, layout: str, *values: Any) -> None:
        self._memory.write(ctx, struct.pack(layout, *values), at)

    def _bytes(self, ctx: Context, ptr: int, length: int) -> bytes:
        ptr &= 0xFFFFFFFF
        return bytes(self._memory.read(ctx, ptr, ptr + length)) if length else b""

    def _list(self, ctx: Context, at: int) -> bytes:
        """The (ptr, len) pair at `at`, read."""
        return self._bytes(ctx, *self._unpack(ctx, "<II", at))

    def _alloc(self, ctx: Context, align: int, size: int) -> int:
        return cast(int, self._realloc(ctx, 0, 0, align, size)) & 0xFFFFFFFF

    def _lower(self, ctx: Context, data: bytes) -> list[int]:
        """Copies `data` into guest memory; returns [ptr, len] as i32 parameters."""
        ptr = self._alloc(ctx, 1, len(data))
        if data:
            self._memory.write(ctx, data, ptr)
        return [_i32(ptr), len(data)]

    def _write_list(self, ctx: Context, at: int, data: bytes) -> None:
        ptr, length = self._lower(ctx, data)
        self._pack(ctx, at, "<iI", ptr, length)

    def _write_entry(self, ctx: Context, at: int, entry: Entry) -> None:
        """entry {key: string @0, revision: u64 @8, value: list<u8> @16}: 24 bytes, align 8."""
        self._write_list(ctx, at, entry.key.encode())
        self._pack(ctx, at + 8, "<Q", entry.revision)
        self._write_list(ctx, at + 16, entry.value)

    # ---- the store port, lowered by hand

    def _get(self, ctx: Caller, key_ptr: int, key_len: int, ret: int) -> None:
        """result<option<entry>, string> at ret: tag u8 @0; ok: option tag u8 @8,
        entry @16; err: message (ptr, len) @8."""
        ret &= 0xFFFFFFFF
        try:
            entry = self._port.get(self._bytes(ctx, key_ptr, key_len).decode())
        except StoreError as e:
            self._pack(ctx, ret, "<B", 1)
            self._write_list(ctx, ret + 8, str(e).encode())
            return
        self._pack(ctx, ret, "<BxxxxxxxB", 0, 0 if entry is None else 1)
        if entry is not None:
            self._write_entry(ctx, ret + 16, entry)

    def _scan(self, ctx: Caller, prefix_ptr: int, prefix_len: int, start_ptr: int, start_len: int, limit: int, ret: int) -> None:
        """result<list<entry>, string> at ret: tag u8 @0; ok: list (ptr, len) @4
        of 24-byte entries; err: message (ptr, len) @4."""
        ret &= 0xFFFFFFFF
        try:
            prefix = self._bytes(ctx, prefix_ptr, prefix_len).decode()
            entries = self._port.scan(prefix, self._bytes(ctx, start_ptr, start_len).decode(), limit & 0xFFFFFFFF)
        except StoreError as e:
            self._pack(ctx, ret, "<B", 1)
            self._write_list(ctx, ret + 4, str(e).encode())
            return
        base = self._alloc(ctx, 8, 24 * len(entries))
        for i, entry in enumerate(entries):
            self._write_entry(ctx, base + 24 * i, entry)
        self._pack(ctx, ret, "<BxxxII", 0, base, len(entries))

    def _put(self, ctx: Caller, key_ptr: int, key_len: int, value_ptr: int, value_len: int, has_expected: int, expected: int, ret: int) -> None:
        """result<u64, put-error> at ret: tag u8 @0; ok: revision u64 @8; err: put-error @8."""
        ret &= 0xFFFFFFFF
        key = self._bytes(ctx, key_ptr, key_len).decode()
        try:
            revision = self._port.put(key, self._bytes(ctx, value_ptr, value_len), expected & 0xFFFFFFFFFFFFFFFF if has_expected else None)
        except (StoreConflict, StoreError) as e:
            self._put_error(ctx, ret, e)
            return
        self._pack(ctx, ret, "<BxxxxxxxQ", 0, revision)

    def _remove(self, ctx: Caller, key_ptr: int, key_len: int, has_expected: int, expected: int, ret: int) -> None:
        """result<_, put-error> at ret."""
        ret &= 0xFFFFFFFF
        try:
            self._port.remove(self._bytes(ctx, key_ptr, key_len).decode(), expected & 0xFFFFFFFFFFFFFFFF if has_expected else None)
        except (StoreConflict, StoreError) as e:
            self._put_error(ctx, ret, e)
            return
        self._pack(ctx, ret, "<B", 0)

    def _put_error(self, ctx: Caller, ret: int, error: Exception) -> None:
        """err(put-error) at ret: tag 1 @0; put-error tag u8 @8 (0 conflict, 1 failure);
        conflict: current revision u64 @16; failure: message (ptr, len) @16."""
        if isinstance(error, StoreConflict):
            self._pack(ctx, ret, "<BxxxxxxxBxxxxxxxQ", 1, 0, error.current)
        else:
            self._pack(ctx, ret, "<BxxxxxxxB", 1, 1)
            self._write_list(ctx, ret + 16, str(error).encode())


def _wasi() -> dict[tuple[str, str], Callable[..., Any]]:
    """Stubs for the few WASI functions Rust's standard library links: no
    environment, no terminal; what the kernel writes (a panic message) goes to
    this process's stderr."""
    io, cli = "wasi:io/streams@0.2.0", "wasi:cli/"

    def memory(ctx: Caller) -> Any:
        return ctx["memory"]

    def tag_at(offset: int) -> Callable[..., None]:
        # result<_, stream-error> and option<…> lower to a tag byte at ret; 0 is ok/none.
        def write(ctx: Caller, *args: int) -> None:
            memory(ctx).write(ctx, b"\x00", args[offset] & 0xFFFFFFFF)
        return write

    def environment(ctx: Caller, ret: int) -> None:
        memory(ctx).write(ctx, bytes(8), ret & 0xFFFFFFFF)  # an empty list

    def check_write(ctx: Caller, _stream: int, ret: int) -> None:
        memory(ctx).write(ctx, struct.pack("<BxxxxxxxQ", 0, 1 << 20), ret & 0xFFFFFFFF)

    def write(ctx: Caller, _stream: int, ptr: int, length: int, ret: int) -> None:
        ptr &= 0xFFFFFFFF
        sys.stderr.write(bytes(memory(ctx).read(ctx, ptr, ptr + length)).decode(errors="replace"))
        memory(ctx).write(ctx, b"\x00", ret & 0xFFFFFFFF)

    def exit(_ctx: Caller, _code: int) -> None:
        raise RuntimeError("the kernel called exit")

    def nothing(_ctx: Caller, *_args: int) -> None:
        return None

    def handle(value: int) -> Callable[..., int]:
        return lambda _ctx, *_args: value

    return {
        ("wasi:io/error@0.2.0", "[resource-drop]error"): nothing,
        ("wasi:io/poll@0.2.0", "[resource-drop]pollable"): nothing,
        (io, "[resource-drop]input-stream"): nothing,
        (io, "[resource-drop]output-stream"): nothing,
        (cli + "terminal-input@0.2.0", "[resource-drop]terminal-input"): nothing,
        (cli + "terminal-output@0.2.0", "[resource-drop]terminal-output"): nothing,
        (cli + "environment@0.2.0", "get-environment"): environment,
        (cli + "exit@0.2.0", "exit"): exit,
        ("wasi:io/poll@0.2.0", "[method]pollable.block"): nothing,
        (io, "[method]output-stream.check-write"): check_write,
        (io, "[method]output-stream.write"): write,
        (io, "[method]output-stream.blocking-flush"): tag_at(1),
        (io, "[method]output-stream.subscribe"): handle(1),
        (cli + "stdin@0.2.0", "get-stdin"): handle(0),
        (cli + "stdout@0.2.0", "get-stdout"): handle(1),
        (cli + "stderr@0.2.0", "get-stderr"): handle(2),
        (cli + "terminal-stdin@0.2.0", "get-terminal-stdin"): tag_at(0),
        (cli + "terminal-stdout@0.2.0", "get-terminal-stdout"): tag_at(0),
        (cli + "terminal-stderr@0.2.0", "get-terminal-stderr"): tag_at(0),
    }
