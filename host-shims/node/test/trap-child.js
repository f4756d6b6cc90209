// Runs under `--wasm-max-mem-pages`, so a large append makes the kernel run out
// of memory and trap (for the trap test); prints what the host answered.
import { Kernel, KernelError, MemoryStore } from '../src/index.js';
import { appendRequest } from './helpers.js';

const store = new MemoryStore();
const kernel = new Kernel(store);
kernel.appendEvents(appendRequest(0, 1));
const before = JSON.stringify(store.entries().map((e) => [e.key, String(e.revision)]));
const big = appendRequest(1, 40);
for (const item of big.items) item.content = 'y'.repeat(512 << 10);
try {
  kernel.appendEvents(big);
  process.stdout.write(JSON.stringify({ trapped: false }));
} catch (e) {
  if (!(e instanceof KernelError)) throw e;
  const unchanged = JSON.stringify(store.entries().map((x) => [x.key, String(x.revision)])) === before;
  const next = kernel.appendEvents(appendRequest(1, 2)).head.seq;
  process.stdout.write(JSON.stringify({ code: e.code, message: e.message, detailJson: e.detailJson, unchanged, next }));
}
