package dev.ctxkernel;

import java.io.ByteArrayOutputStream;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Arrays;
import java.util.HexFormat;

/**
 * Reads the one component artifact and takes out the core module the JVM runs.
 *
 * <p>No JVM runtime loads components yet; the kernel's component is one core
 * module (plus two tiny indirection modules that only exist so imports can be
 * wired before the main module's memory exists, which this host does in Java).
 */
public final class ComponentBinary {
    private static final byte[] COMPONENT_PREAMBLE = {0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00};
    private static final int CORE_MODULE_SECTION = 1;

    private ComponentBinary() {}

    /** The first core module embedded in {@code component}: the kernel's code. */
    public static byte[] coreModule(byte[] component) {
        if (component.length < 8 || !Arrays.equals(Arrays.copyOf(component, 8), COMPONENT_PREAMBLE)) {
            throw new IllegalArgumentException("not a WebAssembly component (wrong preamble)");
        }
        int at = 8;
        while (at < component.length) {
            int id = component[at++] & 0xff;
            long size = 0;
            int shift = 0;
            int b;
            do {
                b = component[at++] & 0xff;
                size |= (long) (b & 0x7f) << shift;
                shift += 7;
            } while ((b & 0x80) != 0);
            if (at + size > component.length) {
                throw new IllegalArgumentException("truncated component section");
            }
            if (id == CORE_MODULE_SECTION) {
                return Arrays.copyOfRange(component, at, at + (int) size);
            }
            at += (int) size;
        }
        throw new IllegalArgumentException("the component holds no core module");
    }

    /** Hex sha256 of {@code bytes}. */
    public static String sha256(byte[] bytes) {
        try {
            return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(bytes));
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    static byte[] readAll(java.io.InputStream in) throws java.io.IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        in.transferTo(out);
        return out.toByteArray();
    }
}
