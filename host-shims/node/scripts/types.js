// Generates TypeScript declarations for every envelope from the JSON Schemas
// in wit/schemas as hosts see them (host-shims/schemas.py writes them to
// build/host-schemas), so the Node API is typed by the same contract the
// kernel is tested against.
import { compile } from 'json-schema-to-typescript';
import { readdir, readFile, writeFile, mkdir } from 'node:fs/promises';

const schemas = new URL('../../../build/host-schemas/', import.meta.url);
const out = new URL('../types/', import.meta.url);
await mkdir(out, { recursive: true });

const names = (await readdir(schemas)).filter((f) => f.endsWith('.schema.json')).sort();
const seen = new Set();
let text = '// Generated from wit/schemas by scripts/types.js; do not edit.\n';
for (const file of names) {
  const schema = JSON.parse(await readFile(new URL(file, schemas), 'utf8'));
  const title = file
    .replace('.schema.json', '')
    .split(/[-.]/)
    .map((w) => w[0].toUpperCase() + w.slice(1))
    .join('');
  schema.title = title;
  const ts = await compile(schema, title, { bannerComment: '', additionalProperties: false, declareExternallyReferenced: true, unreachableDefinitions: false });
  // Shared definitions appear in several schemas: keep the first of each.
  for (const block of ts.split(/\n(?=export )/)) {
    const name = block.match(/^export (?:interface|type) (\w+)/)?.[1];
    if (name && seen.has(name)) continue;
    if (name) seen.add(name);
    text += block.trimEnd() + '\n';
  }
}
await writeFile(new URL('envelopes.d.ts', out), text);
console.log(`wrote types/envelopes.d.ts (${seen.size} types from ${names.length} schemas)`);
