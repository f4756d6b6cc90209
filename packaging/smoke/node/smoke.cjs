// The scenario through the installed tarball, from CommonJS: `node smoke.cjs SCENARIO OUT STORE`.
const { readFileSync, writeFileSync } = require('node:fs');
const { load } = require('ctxkernel');

load().then(async ({ COMPONENT_SHA256, Kernel, SqliteStore }) => {
  const [scenario, out, store] = process.argv.slice(2);
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
});
