package dev.ctxkernel;

import com.dylibso.chicory.runtime.ExportFunction;
import com.dylibso.chicory.runtime.Instance;
import com.dylibso.chicory.runtime.Memory;
import java.nio.charset.StandardCharsets;

/**
 * The slice of the Component Model's canonical ABI the kernel's WIT needs:
 * strings and byte lists (lowered through the guest's {@code cabi_realloc}),
 * and the memory layouts of the results and records its functions use.
 * Offsets below follow the canonical ABI's alignment rules; each layout is
 * spelled out where it is used.
 */
final class CanonicalAbi {
    private final Memory memory;
    private final ExportFunction realloc;

    CanonicalAbi(Instance instance) {
        this.memory = instance.memory();
        this.realloc = instance.export("cabi_realloc");
    }

    Memory memory() {
        return memory;
    }

    /** Guest memory for {@code size} bytes at {@code align}. */
    int alloc(int align, int size) {
        return (int) realloc.apply(0, 0, align, size)[0];
    }

    /** Lowers bytes into guest memory; returns {ptr, len}. */
    int[] lower(byte[] bytes) {
        int ptr = alloc(1, bytes.length);
        memory.write(ptr, bytes);
        return new int[] {ptr, bytes.length};
    }

    int[] lower(String text) {
        return lower(text.getBytes(StandardCharsets.UTF_8));
    }

    String string(long ptr, long len) {
        return new String(memory.readBytes((int) ptr, (int) len), StandardCharsets.UTF_8);
    }

    byte[] bytes(long ptr, long len) {
        return memory.readBytes((int) ptr, (int) len);
    }

    /** Writes a (ptr, len) pair lowered from {@code bytes} at {@code at}. */
    void writeList(int at, byte[] bytes) {
        int[] lowered = lower(bytes);
        memory.writeI32(at, lowered[0]);
        memory.writeI32(at + 4, lowered[1]);
    }

    void writeString(int at, String text) {
        writeList(at, text.getBytes(StandardCharsets.UTF_8));
    }

    void writeByte(int at, int value) {
        memory.writeByte(at, (byte) value);
    }

    /**
     * Reads an export's {@code result<string|list<u8>, kernel-error>} at {@code ret}:
     * discriminant u8 at 0; ok: (ptr, len) at 4; err: code u8 at 4,
     * message (ptr, len) at 8, detail (ptr, len) at 16.
     */
    Result readResult(int ret) {
        int tag = memory.read(ret) & 0xff;
        if (tag == 0) {
            return new Result(bytes(memory.readInt(ret + 4), memory.readInt(ret + 8)), null);
        }
        int code = memory.read(ret + 4) & 0xff;
        String message = string(memory.readInt(ret + 8), memory.readInt(ret + 12));
        String detail = string(memory.readInt(ret + 16), memory.readInt(ret + 20));
        return new Result(null, new KernelException(ErrorCode.values()[code].wireName(), message, detail));
    }

    record Result(byte[] ok, KernelException err) {}
}
