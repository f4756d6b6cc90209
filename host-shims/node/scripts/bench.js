// Times one kernel command on this host, for the cross-host table in
// docs/BENCHMARKS.md: a fresh in-memory kernel, warm-up calls (a fifth of
// the iterations, at least three), then
// ITERATIONS timed calls of COMMAND with the request in FILE.
// Prints {"p50Ms": …, "p95Ms": …}.
//
// With `cold`, the cold start instead: a new kernel answers `info` (the
// request in INFO), then `plan-context` (PLAN), and the name of each
// command is printed as soon as it is answered, for the caller to time from
// the process start.
//
// Usage: node scripts/bench.js COMMAND FILE ITERATIONS
//        node scripts/bench.js cold INFO PLAN
import { readFileSync } from 'node:fs';
import { Kernel, MemoryStore } from '../src/index.js';

const [command, file, iterations] = process.argv.slice(2);
if (command === 'cold') {
  const kernel = new Kernel(new MemoryStore());
  for (const [name, path] of [['info', file], ['plan-context', iterations]]) {
    kernel.call(name, readFileSync(path, 'utf8'));
    process.stdout.write(`${name}\n`);
  }
  process.exit(0);
}
const request = readFileSync(file, 'utf8');
const kernel = new Kernel(new MemoryStore());
for (let i = 0; i < Math.max(3, Number(iterations) / 5); i++) kernel.call(command, request);
const times = [];
for (let i = 0; i < Number(iterations); i++) {
  const start = process.hrtime.bigint();
  kernel.call(command, request);
  times.push(Number(process.hrtime.bigint() - start) / 1e6);
}
times.sort((a, b) => a - b);
const at = (q) => times[Math.min(times.length, Math.max(1, Math.ceil(times.length * q))) - 1];
console.log(JSON.stringify({ p50Ms: at(0.5), p95Ms: at(0.95) }));
