import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { Kernel, KernelError, MemoryStore, SqliteStore, StoreError } from '../src/index.js';
import { appendRequest, planRequest } from './helpers.js';

const child = new URL('./append-child.js', import.meta.url).pathname;

test('two processes share one store file', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ctxk-node-'));
  const path = join(dir, 'store.sqlite');
  try {
    const kernel = new Kernel(await SqliteStore.open(path));
    kernel.appendEvents(appendRequest(0, 2));
    // Another process appends on top of what it sees.
    const run = (from) => spawnSync(process.execPath, [child, path, String(from)], { encoding: 'utf8' });
    const first = run(2);
    assert.equal(first.status, 0, first.stderr);
    assert.equal(JSON.parse(first.stdout).head.seq, 3);
    // This process sees it …
    assert.equal(kernel.planContext(planRequest).binding.sessionHead.seq, 3);
    // … and a writer that built on a head another process moved gets `stale`.
    const lost = run(2);
    assert.equal(lost.status, 3, lost.stderr);
    assert.match(lost.stdout, /"code":"stale"/);
    assert.equal(JSON.parse(lost.stdout).detail.currentHead.seq, 3);
    // Nothing is corrupt: the chain verifies end to end.
    const events = kernel.readEvents({ schemaVersion: 1, sessionId: 's1' });
    assert.equal(events.events.length, 3);
    assert.equal(kernel.info().store.revision, 2);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('foreign files are refused', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ctxk-node-'));
  try {
    const other = join(dir, 'other.sqlite');
    new Database(other).exec('CREATE TABLE invoices (id INTEGER)');
    assert.throws(() => new SqliteStore(new Database(other)), StoreError);
    const garbage = join(dir, 'garbage.sqlite');
    writeFileSync(garbage, Buffer.alloc(8192, 0x42));
    assert.throws(() => new SqliteStore(new Database(garbage)));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('readers never wait on a writer, and a busy writer gets a typed error', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ctxk-node-'));
  const path = join(dir, 'store.sqlite');
  try {
    const kernel = new Kernel(await SqliteStore.open(path, { busyTimeoutMs: 300 }));
    kernel.appendEvents(appendRequest(0, 2));
    // Another connection holds the write lock, as a long compaction would.
    const writer = new Database(path);
    writer.exec('BEGIN IMMEDIATE');
    writer.exec('UPDATE ctxk_entries SET revision = revision + 1');
    // The lock is held throughout: a read that waited for it would fail busy.
    assert.equal(kernel.planContext(planRequest).binding.sessionHead.seq, 2);
    assert.equal(kernel.readEvents({ schemaVersion: 1, sessionId: 's1' }).events.length, 2);
    assert.equal(kernel.info().store.revision, 1, 'readers see the last commit, not the open transaction');
    const started = performance.now();
    assert.throws(() => kernel.appendEvents(appendRequest(2, 1)), (e) => e instanceof KernelError && e.code === 'storage-failure'
      && e.message === 'cannot begin a transaction: the store is busy: another connection held its write lock for more than 300 ms');
    assert.ok(performance.now() - started >= 290);
    writer.exec('ROLLBACK');
    writer.close();
    assert.equal(kernel.appendEvents(appendRequest(2, 1)).head.seq, 3);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the memory store scans in byte order from any cursor', () => {
  // Around the one-byte/two-byte boundary, the BMP's top, past it (a surrogate pair), and the key separators.
  const alphabet = ['a', 'b', '/', '-', '%', '\x7f', '\x80', 'é', '\ue000', '\uffff', '\u{1f600}'];
  const bytes = (s) => Buffer.from(s);
  for (let seed = 1; seed <= 4; seed++) {
    let state = seed;
    const next = (n) => {
      state = (state * 1103515245 + 12345) % 2147483648;
      return state % n;
    };
    const word = () => Array.from({ length: next(5) }, () => alphabet[next(alphabet.length)]).join('');
    const store = new MemoryStore();
    const model = new Map();
    for (let i = 0; i < 2000; i++) {
      const key = word();
      if (next(10) < 7) {
        store.put(key, bytes(key));
        model.set(key, key);
      } else {
        store.remove(key);
        model.delete(key);
      }
    }
    const ordered = [...model.keys()].sort((a, b) => Buffer.compare(bytes(a), bytes(b)));
    assert.deepEqual(store.entries().map((e) => e.key), ordered);
    for (let i = 0; i < 400; i++) {
      const prefix = word().slice(0, 2);
      const after = word();
      const limit = next(13);
      const expected = ordered.filter((k) => k.startsWith(prefix) && Buffer.compare(bytes(k), bytes(after)) > 0).slice(0, limit);
      assert.deepEqual(store.scan(prefix, after, limit).map((e) => e.key), expected, `scan(${JSON.stringify([prefix, after, limit])})`);
    }
  }
});
