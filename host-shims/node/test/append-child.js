// Appends one event to a store file from another process (for the sharing test).
import { Kernel, KernelError, SqliteStore } from '../src/index.js';
import { item, NOW } from './helpers.js';

const [path, from] = process.argv.slice(2);
const kernel = new Kernel(await SqliteStore.open(path));
const seq = Number(from) + 1;
try {
  const out = kernel.appendEvents({ schemaVersion: 1, sessionId: 's1', expectedHead: { seq: Number(from) }, items: [item(seq, 'user', `from another process ${seq}-${process.pid}`, { itemId: `child-${process.pid}` })], now: NOW });
  process.stdout.write(JSON.stringify(out));
} catch (e) {
  if (!(e instanceof KernelError)) throw e;
  process.stdout.write(JSON.stringify({ code: e.code, detail: e.detail }));
  process.exitCode = 3;
}
