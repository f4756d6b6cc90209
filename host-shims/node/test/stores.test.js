import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { Kernel, KernelError, SqliteStore, StoreError } from '../src/index.js';
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
