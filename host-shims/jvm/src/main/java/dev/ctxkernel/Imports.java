package dev.ctxkernel;

import static com.dylibso.chicory.wasm.types.ValType.I32;
import static com.dylibso.chicory.wasm.types.ValType.I64;

import com.dylibso.chicory.runtime.HostFunction;
import com.dylibso.chicory.runtime.ImportValues;
import com.dylibso.chicory.runtime.Instance;
import com.dylibso.chicory.runtime.WasmFunctionHandle;
import com.dylibso.chicory.wasm.types.ValType;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.function.Function;
import java.util.logging.Logger;

/**
 * The core-level imports of the kernel's module: its store port, lowered by
 * hand per the canonical ABI, and stubs for the few WASI functions Rust's
 * standard library links (no environment, no terminal; stderr goes to a logger).
 */
final class Imports {
    private static final String STORE = "ctxkernel:kernel/store@0.1.0";
    private static final Logger STDERR = Logger.getLogger("dev.ctxkernel.kernel.stderr");
    private static final long[] NONE = new long[0];

    private Imports() {}

    /** The import values for one instance over {@code store}; {@code abi} resolves once the instance exists. */
    static ImportValues of(Store store, Function<Instance, CanonicalAbi> abi) {
        return ImportValues.builder()
                .addFunction(
                        fn(STORE, "get", List.of(I32, I32, I32), (inst, a) -> get(store, abi.apply(inst), a)),
                        fn(STORE, "scan", List.of(I32, I32, I32, I32, I32, I32), (inst, a) -> scan(store, abi.apply(inst), a)),
                        fn(STORE, "put", List.of(I32, I32, I32, I32, I32, I64, I32), (inst, a) -> put(store, abi.apply(inst), a)),
                        fn(STORE, "remove", List.of(I32, I32, I32, I64, I32), (inst, a) -> remove(store, abi.apply(inst), a)))
                .addFunction(wasi(abi))
                .build();
    }

    private static HostFunction fn(String module, String name, List<ValType> params, WasmFunctionHandle handle) {
        return new HostFunction(module, name, params, List.of(), handle);
    }

    /**
     * get: func(key: string) -> result<option<entry>, string>, at ret:
     * tag u8 @0; ok: option tag u8 @8, entry @16 {key (ptr,len) @16, revision u64 @24,
     * value (ptr,len) @32}; err: message (ptr,len) @8.
     */
    private static long[] get(Store store, CanonicalAbi abi, long[] a) {
        int ret = (int) a[2];
        try {
            Store.Entry entry = store.get(abi.string(a[0], a[1]));
            abi.writeByte(ret, 0);
            abi.writeByte(ret + 8, entry == null ? 0 : 1);
            if (entry != null) {
                writeEntry(abi, ret + 16, entry);
            }
        } catch (Store.StoreException e) {
            abi.writeByte(ret, 1);
            abi.writeString(ret + 8, String.valueOf(e.getMessage()));
        }
        return NONE;
    }

    /** entry {key: string @0, revision: u64 @8, value: list<u8> @16}: 24 bytes, align 8. */
    private static void writeEntry(CanonicalAbi abi, int at, Store.Entry entry) {
        abi.writeString(at, entry.key());
        abi.memory().writeLong(at + 8, entry.revision());
        abi.writeList(at + 16, entry.value());
    }

    /**
     * scan: func(prefix, start-after: string, limit: u32) -> result<list<entry>, string>,
     * at ret: tag u8 @0; ok: list (ptr,len) @4 of 24-byte entries; err: message @4.
     */
    private static long[] scan(Store store, CanonicalAbi abi, long[] a) {
        int ret = (int) a[5];
        try {
            List<Store.Entry> entries = store.scan(abi.string(a[0], a[1]), abi.string(a[2], a[3]), (int) a[4]);
            int base = abi.alloc(8, 24 * entries.size());
            for (int i = 0; i < entries.size(); i++) {
                writeEntry(abi, base + 24 * i, entries.get(i));
            }
            abi.writeByte(ret, 0);
            abi.memory().writeI32(ret + 4, base);
            abi.memory().writeI32(ret + 8, entries.size());
        } catch (Store.StoreException e) {
            abi.writeByte(ret, 1);
            abi.writeString(ret + 4, String.valueOf(e.getMessage()));
        }
        return NONE;
    }

    /**
     * put: func(key: string, value: list<u8>, expected: option<u64>) -> result<u64, put-error>,
     * at ret: tag u8 @0; ok: revision u64 @8; err: put-error @8 (see {@link #putError}).
     */
    private static long[] put(Store store, CanonicalAbi abi, long[] a) {
        int ret = (int) a[6];
        Long expected = a[4] == 0 ? null : a[5];
        try {
            long revision = store.put(abi.string(a[0], a[1]), abi.bytes(a[2], a[3]), expected);
            abi.writeByte(ret, 0);
            abi.memory().writeLong(ret + 8, revision);
        } catch (Store.StoreConflict e) {
            putError(abi, ret, e);
        } catch (Store.StoreException e) {
            putError(abi, ret, e);
        }
        return NONE;
    }

    /** remove: func(key: string, expected: option<u64>) -> result<_, put-error>. */
    private static long[] remove(Store store, CanonicalAbi abi, long[] a) {
        int ret = (int) a[4];
        Long expected = a[2] == 0 ? null : a[3];
        try {
            store.remove(abi.string(a[0], a[1]), expected);
            abi.writeByte(ret, 0);
        } catch (Store.StoreConflict e) {
            putError(abi, ret, e);
        } catch (Store.StoreException e) {
            putError(abi, ret, e);
        }
        return NONE;
    }

    /**
     * err(put-error) at ret: tag 1 @0; put-error tag u8 @8 (0 conflict, 1 failure);
     * conflict: current revision u64 @16; failure: message (ptr,len) @16.
     */
    private static void putError(CanonicalAbi abi, int ret, Exception e) {
        abi.writeByte(ret, 1);
        if (e instanceof Store.StoreConflict conflict) {
            abi.writeByte(ret + 8, 0);
            abi.memory().writeLong(ret + 16, conflict.current);
        } else {
            abi.writeByte(ret + 8, 1);
            abi.writeString(ret + 16, String.valueOf(e.getMessage()));
        }
    }

    private static HostFunction[] wasi(Function<Instance, CanonicalAbi> abi) {
        String io = "wasi:io/streams@0.2.0";
        String cli = "wasi:cli/";
        WasmFunctionHandle nothing = (inst, a) -> NONE;
        // result<_, stream-error> and option<…> both lower to a tag byte at ret; 0 is ok/none.
        WasmFunctionHandle okAt1 = (inst, a) -> {
            abi.apply(inst).writeByte((int) a[1], 0);
            return NONE;
        };
        WasmFunctionHandle noneAt0 = (inst, a) -> {
            abi.apply(inst).writeByte((int) a[0], 0);
            return NONE;
        };
        return new HostFunction[] {
            fn("wasi:io/error@0.2.0", "[resource-drop]error", List.of(I32), nothing),
            fn("wasi:io/poll@0.2.0", "[resource-drop]pollable", List.of(I32), nothing),
            fn(io, "[resource-drop]input-stream", List.of(I32), nothing),
            fn(io, "[resource-drop]output-stream", List.of(I32), nothing),
            fn(cli + "terminal-input@0.2.0", "[resource-drop]terminal-input", List.of(I32), nothing),
            fn(cli + "terminal-output@0.2.0", "[resource-drop]terminal-output", List.of(I32), nothing),
            // get-environment: () -> list<tuple<string, string>>: an empty list (ptr, len) at ret.
            fn(cli + "environment@0.2.0", "get-environment", List.of(I32), (inst, a) -> {
                abi.apply(inst).memory().writeLong((int) a[0], 0);
                return NONE;
            }),
            fn(cli + "exit@0.2.0", "exit", List.of(I32), (inst, a) -> {
                throw new IllegalStateException("the kernel called exit");
            }),
            fn("wasi:io/poll@0.2.0", "[method]pollable.block", List.of(I32), nothing),
            // check-write: result<u64, stream-error>: ok with room for a whole write.
            fn(io, "[method]output-stream.check-write", List.of(I32, I32), (inst, a) -> {
                CanonicalAbi m = abi.apply(inst);
                m.writeByte((int) a[1], 0);
                m.memory().writeLong((int) a[1] + 8, 1L << 20);
                return NONE;
            }),
            fn(io, "[method]output-stream.write", List.of(I32, I32, I32, I32), (inst, a) -> {
                CanonicalAbi m = abi.apply(inst);
                STDERR.warning(new String(m.bytes(a[1], a[2]), StandardCharsets.UTF_8).stripTrailing());
                m.writeByte((int) a[3], 0);
                return NONE;
            }),
            fn(io, "[method]output-stream.blocking-flush", List.of(I32, I32), okAt1),
            new HostFunction(io, "[method]output-stream.subscribe", List.of(I32), List.of(I32), (inst, a) -> new long[] {1}),
            new HostFunction(cli + "stdin@0.2.0", "get-stdin", List.of(), List.of(I32), (inst, a) -> new long[] {0}),
            new HostFunction(cli + "stdout@0.2.0", "get-stdout", List.of(), List.of(I32), (inst, a) -> new long[] {1}),
            new HostFunction(cli + "stderr@0.2.0", "get-stderr", List.of(), List.of(I32), (inst, a) -> new long[] {2}),
            fn(cli + "terminal-stdin@0.2.0", "get-terminal-stdin", List.of(I32), noneAt0),
            fn(cli + "terminal-stdout@0.2.0", "get-terminal-stdout", List.of(I32), noneAt0),
            fn(cli + "terminal-stderr@0.2.0", "get-terminal-stderr", List.of(I32), noneAt0),
        };
    }
}
