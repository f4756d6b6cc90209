// The scenario through an installed package's API, as both entry points load it.
import { readFileSync, writeFileSync } from 'node:fs';

/** Runs SCENARIO on a kernel over the SQLite file STORE; writes the digest and each answer to OUT. */
export async function replay({ COMPONENT_SHA256, Kernel, SqliteStore }, [scenario, out, store]) {
  const kernel = new Kernel(await SqliteStore.open(store));
  const lines = [COMPONENT_SHA256];
  let previous = '';
  for (const step of JSON.parse(readFileSync(scenario, 'utf8')).steps) {
    let request = step.request;
    if (step.command === 'decide-memory') request = { ...request, memoryId: JSON.parse(previous).receipts[0].memory.memoryId };
    previous = kernel.call(step.command, JSON.stringify(request));
    lines.push(previous);
  }
  writeFileSync(out, lines.join('\n') + '\n');
}
