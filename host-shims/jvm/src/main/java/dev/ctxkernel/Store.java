package dev.ctxkernel;

import java.util.List;

/**
 * The kernel's storage port. Keys are ASCII; {@code scan} returns the keys
 * after {@code startAfter} that start with {@code prefix}, in bytewise order:
 * {@code limit} of them, or fewer only when no more follow (the kernel reads
 * a short page as the end).
 * {@code put} and {@code remove} compare the key's revision with
 * {@code expected} (null: unconditional, 0: absent) and throw
 * {@link StoreConflict} on a mismatch; failures throw {@link StoreException}.
 * Each kernel call runs between {@code begin} and {@code commit} or
 * {@code rollback}; {@code begin}'s {@code write} is false for a command that
 * only reads.
 */
public interface Store {
    record Entry(String key, long revision, byte[] value) {}

    Entry get(String key) throws StoreException;

    List<Entry> scan(String prefix, String startAfter, int limit) throws StoreException;

    long put(String key, byte[] value, Long expected) throws StoreException, StoreConflict;

    void remove(String key, Long expected) throws StoreException, StoreConflict;

    void begin(boolean write) throws StoreException;

    void commit() throws StoreException;

    void rollback() throws StoreException;

    /** A write whose expected revision did not match; carries the current one (0: absent). */
    final class StoreConflict extends Exception {
        public final long current;

        public StoreConflict(long current) {
            super("revision conflict (current " + current + ")");
            this.current = current;
        }
    }

    /** A store that failed as stores do (busy, full, I/O): the kernel reports {@code storage-failure}. */
    final class StoreException extends Exception {
        public StoreException(String message, Throwable cause) {
            super(message, cause);
        }

        public StoreException(String message) {
            super(message);
        }
    }
}
