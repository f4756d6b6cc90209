// Stores implementing the kernel's storage port. The kernel owns every key
// and byte; a store keeps per-key revisions, compare-and-swap, bytewise key
// order, and one transaction per kernel call.

import btree from 'sorted-btree';

const { default: BTree } = btree;

/** A write whose expected revision did not match; carries the current one (0: absent). */
export class StoreConflict extends Error {
  constructor(current) {
    super(`revision conflict (current ${current})`);
    this.name = 'StoreConflict';
    this.current = BigInt(current);
  }
}

/** A store that failed as stores do (busy, full, I/O): the kernel reports `storage-failure`. */
export class StoreError extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = 'StoreError';
  }
}

const checkRevision = (current, expected) => {
  if (expected !== undefined && expected !== null && BigInt(expected) !== current) {
    throw new StoreConflict(current);
  }
};

/** Process memory; for tests and throwaway sessions. Kept sorted, so a scan reads only the page it returns. */
export class MemoryStore {
  #entries = new BTree(undefined, compareBytes);
  #undo = null;

  get(key) {
    const e = this.#entries.get(key);
    return e && { key, revision: e.revision, value: e.value };
  }

  scan(prefix, startAfter, limit) {
    // From the prefix itself when the cursor is before it, else just past the cursor.
    const from = compareBytes(startAfter, prefix) < 0 ? prefix : startAfter;
    const out = [];
    for (const [key, e] of this.#entries.entries(from)) {
      if (out.length >= limit || !key.startsWith(prefix)) break;
      if (key !== startAfter) out.push({ key, revision: e.revision, value: e.value });
    }
    return out;
  }

  put(key, value, expected) {
    const current = this.#entries.get(key)?.revision ?? 0n;
    checkRevision(current, expected);
    this.#touch(key);
    this.#entries.set(key, { revision: current + 1n, value: Uint8Array.from(value) });
    return current + 1n;
  }

  remove(key, expected) {
    checkRevision(this.#entries.get(key)?.revision ?? 0n, expected);
    this.#touch(key);
    this.#entries.delete(key);
  }

  begin() {
    if (this.#undo) throw new StoreError('a transaction is already open');
    this.#undo = new Map();
  }

  commit() {
    this.#undo = null;
  }

  rollback() {
    for (const [key, before] of this.#undo ?? []) {
      if (before) this.#entries.set(key, before);
      else this.#entries.delete(key);
    }
    this.#undo = null;
  }

  /** Every entry in key order (for dumps and tests). */
  entries() {
    return [...this.#entries.keys()].map((k) => this.get(k));
  }

  #touch(key) {
    if (this.#undo && !this.#undo.has(key)) this.#undo.set(key, this.#entries.get(key));
  }
}

/**
 * Bytewise (UTF-8) order, which is code point order. UTF-16 code units are in
 * that order too, but for a surrogate (half of a code point past U+FFFF),
 * which comes after every other unit.
 */
function compareBytes(a, b) {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x !== y) {
      const sx = x >= 0xd800 && x <= 0xdfff;
      const sy = y >= 0xd800 && y <= 0xdfff;
      if (sx !== sy) return sx ? 1 : -1;
      return x < y ? -1 : 1;
    }
  }
  return a.length - b.length;
}

/** How long a call waits for another connection's write lock before `storage-failure`. */
export const BUSY_TIMEOUT_MS = 5000;

/** The one message every host's SQLite store gives for a lock it could not get. */
const busy = (timeoutMs) => `the store is busy: another connection held its write lock for more than ${timeoutMs} ms`;

/** `PRAGMA application_id` of a ctxkernel store ("ctk1") and its table layout version. */
export const APPLICATION_ID = 0x63746b31;
export const LAYOUT_VERSION = 1;

/**
 * The embedded default: one SQLite file with the same layout in every host,
 * so a store written here opens in Python, the JVM and `ctxk`.
 *
 * Pass a better-sqlite3 `Database` (or anything with its synchronous API,
 * such as an Electron or VS Code build of it), or a path.
 *
 * A command that writes takes the write lock when it begins, waiting up to
 * `busyTimeoutMs` for another connection to release it; one that only reads
 * takes none and reads a snapshot (WAL), so it never waits on a writer.
 */
export class SqliteStore {
  #db;
  #statements;
  #busyTimeoutMs;

  static async open(path, options) {
    const { default: Database } = await import('better-sqlite3');
    return new SqliteStore(new Database(path), options);
  }

  constructor(db, { busyTimeoutMs = BUSY_TIMEOUT_MS } = {}) {
    this.#db = db;
    this.#busyTimeoutMs = busyTimeoutMs;
    db.pragma(`busy_timeout = ${busyTimeoutMs}`);
    const app = db.pragma('application_id', { simple: true });
    const layout = db.pragma('user_version', { simple: true });
    const tables = db.prepare('SELECT count(*) AS n FROM sqlite_schema').get().n;
    if (app !== APPLICATION_ID && (app !== 0 || tables !== 0)) {
      throw new StoreError(`this SQLite file is not a ctxkernel store (application_id ${app})`);
    }
    if (layout > LAYOUT_VERSION) {
      throw new StoreError(`this store has layout ${layout}; this host reads layout ${LAYOUT_VERSION}`);
    }
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = NORMAL');
    if (app === 0) {
      db.exec(`BEGIN IMMEDIATE;
        CREATE TABLE IF NOT EXISTS ctxk_entries (
          key TEXT PRIMARY KEY NOT NULL,
          revision INTEGER NOT NULL,
          value BLOB NOT NULL
        ) WITHOUT ROWID;
        PRAGMA application_id = ${APPLICATION_ID};
        PRAGMA user_version = ${LAYOUT_VERSION};
        COMMIT;`);
    }
    this.#statements = {
      get: db.prepare('SELECT revision, value FROM ctxk_entries WHERE key = ?').safeIntegers(true),
      // One lower bound per query, so SQLite seeks to it (with two it may
      // seek to the prefix and step over every earlier page again).
      scanFirst: db.prepare('SELECT key, revision, value FROM ctxk_entries WHERE key >= ? AND key < ? ORDER BY key LIMIT ?').safeIntegers(true),
      scanAfter: db.prepare('SELECT key, revision, value FROM ctxk_entries WHERE key > ? AND key < ? ORDER BY key LIMIT ?').safeIntegers(true),
      revision: db.prepare('SELECT revision FROM ctxk_entries WHERE key = ?').safeIntegers(true),
      upsert: db.prepare(
        'INSERT INTO ctxk_entries (key, revision, value) VALUES (?, ?, ?) ON CONFLICT (key) DO UPDATE SET revision = excluded.revision, value = excluded.value',
      ),
      delete: db.prepare('DELETE FROM ctxk_entries WHERE key = ?'),
    };
  }

  get database() {
    return this.#db;
  }

  get(key) {
    const row = this.#guard(() => this.#statements.get.get(key));
    return row && { key, revision: row.revision, value: new Uint8Array(row.value) };
  }

  scan(prefix, startAfter, limit) {
    const [statement, from] = startAfter < prefix ? [this.#statements.scanFirst, prefix] : [this.#statements.scanAfter, startAfter];
    const rows = this.#guard(() => statement.all(from, prefixEnd(prefix), limit));
    return rows.filter((r) => r.key.startsWith(prefix)).map((r) => ({ key: r.key, revision: r.revision, value: new Uint8Array(r.value) }));
  }

  put(key, value, expected) {
    const current = this.#guard(() => this.#statements.revision.get(key))?.revision ?? 0n;
    checkRevision(current, expected);
    this.#guard(() => this.#statements.upsert.run(key, current + 1n, value));
    return current + 1n;
  }

  remove(key, expected) {
    checkRevision(this.#guard(() => this.#statements.revision.get(key))?.revision ?? 0n, expected);
    this.#guard(() => this.#statements.delete.run(key));
  }

  /** `write` is false for a command that only reads. */
  begin(write = true) {
    this.#guard(() => this.#db.exec(write ? 'BEGIN IMMEDIATE' : 'BEGIN DEFERRED'));
  }

  commit() {
    this.#guard(() => this.#db.exec('COMMIT'));
  }

  rollback() {
    if (this.#db.inTransaction) this.#guard(() => this.#db.exec('ROLLBACK'));
  }

  close() {
    this.#db.close();
  }

  #guard(f) {
    try {
      return f();
    } catch (e) {
      if (e instanceof StoreError) throw e;
      throw new StoreError(e.code?.startsWith('SQLITE_BUSY') ? busy(this.#busyTimeoutMs) : e.message, { cause: e });
    }
  }
}

/** The smallest ASCII string above every key starting with `prefix`. */
function prefixEnd(prefix) {
  for (let i = prefix.length - 1; i >= 0; i--) {
    const c = prefix.charCodeAt(i);
    if (c < 0x7f) return prefix.slice(0, i) + String.fromCharCode(c + 1);
  }
  return '\x7f';
}
