package dev.ctxkernel;

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.sqlite.SQLiteErrorCode;

/**
 * The embedded default: one SQLite file with the same layout in every host,
 * so a store written here opens in Node, Python and {@code ctxk}.
 *
 * <p>A command that writes takes the write lock when it begins, waiting up to
 * the busy timeout for another connection to release it; one that only reads
 * takes none and reads a snapshot (WAL), so it never waits on a writer.
 */
public final class SqliteStore implements Store, AutoCloseable {
    /** {@code PRAGMA application_id} of a ctxkernel store ("ctk1") and its table layout version. */
    public static final int APPLICATION_ID = 0x63746b31;
    public static final int LAYOUT_VERSION = 1;
    /** How long a call waits for another connection's write lock before {@code storage-failure}. */
    public static final Duration BUSY_TIMEOUT = Duration.ofMillis(5000);

    private final Connection db;
    private final long busyTimeoutMs;
    /** Each statement is prepared once, when the store opens, and reused by every call. */
    private final PreparedStatement selectRevision;
    private final PreparedStatement selectEntry;
    private final PreparedStatement scanFirst;
    private final PreparedStatement scanAfter;
    private final PreparedStatement upsert;
    private final PreparedStatement delete;
    /** Transactions are explicit statements, so JDBC's auto-commit flag does not track them. */
    private boolean inTransaction;

    public SqliteStore(String path) throws StoreException {
        this(path, BUSY_TIMEOUT);
    }

    public SqliteStore(String path, Duration busyTimeout) throws StoreException {
        busyTimeoutMs = busyTimeout.toMillis();
        try {
            db = DriverManager.getConnection("jdbc:sqlite:" + path);
            try (Statement s = db.createStatement()) {
                s.execute("PRAGMA busy_timeout = " + busyTimeoutMs);
                int app = intPragma(s, "PRAGMA application_id");
                int layout = intPragma(s, "PRAGMA user_version");
                int tables = intPragma(s, "SELECT count(*) FROM sqlite_schema");
                if (app != APPLICATION_ID && (app != 0 || tables != 0)) {
                    db.close();
                    throw new StoreException("this SQLite file is not a ctxkernel store (application_id " + Integer.toHexString(app) + ")");
                }
                if (layout > LAYOUT_VERSION) {
                    db.close();
                    throw new StoreException("this store has layout " + layout + "; this host reads layout " + LAYOUT_VERSION);
                }
                s.execute("PRAGMA journal_mode = WAL");
                s.execute("PRAGMA synchronous = NORMAL");
                if (app == 0) {
                    s.execute("BEGIN IMMEDIATE");
                    s.execute("CREATE TABLE IF NOT EXISTS ctxk_entries (key TEXT PRIMARY KEY NOT NULL, revision INTEGER NOT NULL, value BLOB NOT NULL) WITHOUT ROWID");
                    s.execute("PRAGMA application_id = " + APPLICATION_ID);
                    s.execute("PRAGMA user_version = " + LAYOUT_VERSION);
                    s.execute("COMMIT");
                }
            }
            selectRevision = db.prepareStatement("SELECT revision FROM ctxk_entries WHERE key = ?");
            selectEntry = db.prepareStatement("SELECT revision, value FROM ctxk_entries WHERE key = ?");
            // One lower bound per query, so SQLite seeks to it (with two it may
            // seek to the prefix and step over every earlier page again).
            scanFirst = db.prepareStatement("SELECT key, revision, value FROM ctxk_entries WHERE key >= ? AND key < ? ORDER BY key LIMIT ?");
            scanAfter = db.prepareStatement("SELECT key, revision, value FROM ctxk_entries WHERE key > ? AND key < ? ORDER BY key LIMIT ?");
            upsert = db.prepareStatement(
                    "INSERT INTO ctxk_entries (key, revision, value) VALUES (?, ?, ?) ON CONFLICT (key) DO UPDATE SET revision = excluded.revision, value = excluded.value");
            delete = db.prepareStatement("DELETE FROM ctxk_entries WHERE key = ?");
        } catch (SQLException e) {
            throw new StoreException("cannot open " + path + ": " + e.getMessage(), e);
        }
    }

    private static int intPragma(Statement s, String sql) throws SQLException {
        try (ResultSet r = s.executeQuery(sql)) {
            return r.next() ? r.getInt(1) : 0;
        }
    }

    private interface Sql<T> {
        T run() throws SQLException;
    }

    private <T> T guard(Sql<T> sql) throws StoreException {
        try {
            return sql.run();
        } catch (SQLException e) {
            // The one message every host's SQLite store gives for a lock it could not get.
            boolean busy = (e.getErrorCode() & 0xff) == SQLiteErrorCode.SQLITE_BUSY.code;
            throw new StoreException(busy ? "the store is busy: another connection held its write lock for more than " + busyTimeoutMs + " ms" : e.getMessage(), e);
        }
    }

    private long revision(String key) throws StoreException {
        return guard(() -> {
            selectRevision.setString(1, key);
            try (ResultSet r = selectRevision.executeQuery()) {
                return r.next() ? r.getLong(1) : 0L;
            }
        });
    }

    @Override
    public Entry get(String key) throws StoreException {
        return guard(() -> {
            selectEntry.setString(1, key);
            try (ResultSet r = selectEntry.executeQuery()) {
                return r.next() ? new Entry(key, r.getLong(1), r.getBytes(2)) : null;
            }
        });
    }

    @Override
    public List<Entry> scan(String prefix, String startAfter, int limit) throws StoreException {
        return guard(() -> {
            boolean first = startAfter.compareTo(prefix) < 0;
            PreparedStatement p = first ? scanFirst : scanAfter;
            p.setString(1, first ? prefix : startAfter);
            p.setString(2, prefixEnd(prefix));
            p.setInt(3, limit);
            List<Entry> out = new ArrayList<>();
            try (ResultSet r = p.executeQuery()) {
                while (r.next()) {
                    String key = r.getString(1);
                    if (key.startsWith(prefix)) {
                        out.add(new Entry(key, r.getLong(2), r.getBytes(3)));
                    }
                }
            }
            return out;
        });
    }

    @Override
    public long put(String key, byte[] value, Long expected) throws StoreException, StoreConflict {
        long current = revision(key);
        MemoryStore.check(current, expected);
        guard(() -> {
            upsert.setString(1, key);
            upsert.setLong(2, current + 1);
            upsert.setBytes(3, value);
            return upsert.executeUpdate();
        });
        return current + 1;
    }

    @Override
    public void remove(String key, Long expected) throws StoreException, StoreConflict {
        MemoryStore.check(revision(key), expected);
        guard(() -> {
            delete.setString(1, key);
            return delete.executeUpdate();
        });
    }

    @Override
    public void begin(boolean write) throws StoreException {
        execute(write ? "BEGIN IMMEDIATE" : "BEGIN DEFERRED");
        inTransaction = true;
    }

    @Override
    public void commit() throws StoreException {
        execute("COMMIT");
        inTransaction = false;
    }

    @Override
    public void rollback() throws StoreException {
        if (inTransaction) {
            inTransaction = false;
            execute("ROLLBACK");
        }
    }

    private void execute(String sql) throws StoreException {
        guard(() -> {
            try (Statement s = db.createStatement()) {
                return s.execute(sql);
            }
        });
    }

    @Override
    public void close() throws StoreException {
        guard(() -> {
            db.close();
            return null;
        });
    }

    /** The smallest ASCII string above every key starting with {@code prefix}. */
    private static String prefixEnd(String prefix) {
        for (int i = prefix.length() - 1; i >= 0; i--) {
            char c = prefix.charAt(i);
            if (c < 0x7f) {
                return prefix.substring(0, i) + (char) (c + 1);
            }
        }
        return "\u007f";
    }
}
