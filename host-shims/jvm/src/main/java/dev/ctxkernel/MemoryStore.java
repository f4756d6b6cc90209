package dev.ctxkernel;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/** Process memory; for tests and throwaway sessions. */
public final class MemoryStore implements Store {
    // Keys are ASCII, so String order is bytewise order.
    private final TreeMap<String, Entry> entries = new TreeMap<>();
    private Map<String, Entry> undo;

    @Override
    public Entry get(String key) {
        return entries.get(key);
    }

    @Override
    public List<Entry> scan(String prefix, String startAfter, int limit) {
        List<Entry> out = new ArrayList<>();
        for (Entry e : entries.tailMap(startAfter.compareTo(prefix) < 0 ? prefix : startAfter, true).values()) {
            if (out.size() >= limit || !e.key().startsWith(prefix)) {
                break;
            }
            if (e.key().compareTo(startAfter) > 0) {
                out.add(e);
            }
        }
        return out;
    }

    @Override
    public long put(String key, byte[] value, Long expected) throws StoreConflict {
        Entry current = entries.get(key);
        long revision = current == null ? 0 : current.revision();
        check(revision, expected);
        touch(key);
        entries.put(key, new Entry(key, revision + 1, value.clone()));
        return revision + 1;
    }

    @Override
    public void remove(String key, Long expected) throws StoreConflict {
        Entry current = entries.get(key);
        check(current == null ? 0 : current.revision(), expected);
        touch(key);
        entries.remove(key);
    }

    @Override
    public void begin(boolean write) throws StoreException {
        if (undo != null) {
            throw new StoreException("a transaction is already open");
        }
        undo = new HashMap<>();
    }

    @Override
    public void commit() {
        undo = null;
    }

    @Override
    public void rollback() {
        if (undo != null) {
            undo.forEach((key, before) -> {
                if (before == null) {
                    entries.remove(key);
                } else {
                    entries.put(key, before);
                }
            });
        }
        undo = null;
    }

    /** Every entry in key order (for dumps and tests). */
    public List<Entry> entries() {
        return List.copyOf(entries.values());
    }

    /** A printable dump of the whole store (for tests). */
    public String dump() {
        StringBuilder out = new StringBuilder();
        for (Entry e : entries.values()) {
            out.append(e.key()).append('@').append(e.revision()).append('=').append(new String(e.value(), StandardCharsets.ISO_8859_1)).append('\n');
        }
        return out.toString();
    }

    private void touch(String key) {
        if (undo != null && !undo.containsKey(key)) {
            undo.put(key, entries.get(key));
        }
    }

    static void check(long current, Long expected) throws StoreConflict {
        if (expected != null && expected != current) {
            throw new StoreConflict(current);
        }
    }
}
