// Runs parity fixtures (tests/parity) against fresh SQLite stores and writes,
// per fixture, a transcript of every step and a canonical dump of the final
// store — the same bytes every host's runner writes.
//
// Usage: node scripts/parity.js --out DIR FIXTURE.json...
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { Kernel, KernelError, SqliteStore, parseJson, stringifyJson } from '../src/index.js';

const args = process.argv.slice(2);
const option = (name) => (args.includes(name) ? args[args.indexOf(name) + 1] : undefined);
const out = option('--out');
const read = option('--read');
const fixtures = args.filter((a, i) => !a.startsWith('--') && !args[i - 1]?.startsWith('--'));
mkdirSync(out, { recursive: true });

const sha256 = (bytes) => createHash('sha256').update(bytes).digest('hex');
const encoder = new TextEncoder();

/** A `$ref` that points at nothing: no such step, a step that answered with an error or was an action, or no such member. */
class Unresolved extends Error {
  constructor(reference) {
    super(`$ref ${reference} points at nothing`);
    this.reference = reference;
  }
}

const own = (object, key) => object !== null && typeof object === 'object' && Object.prototype.hasOwnProperty.call(object, key);

function resolve(value, responses) {
  if (Array.isArray(value)) return value.map((v) => resolve(v, responses));
  if (value && typeof value === 'object') {
    if ('$ref' in value) {
      const reference = typeof value.$ref === 'string' ? value.$ref : '';
      const at = reference.indexOf('#');
      const step = reference.slice(0, at);
      let found = at > 0 && /^[0-9]+$/.test(step) ? responses[Number(step)] : undefined;
      const pointer = reference.slice(at + 1);
      if (found === null || found === undefined || at < 0 || (pointer !== '' && !pointer.startsWith('/'))) throw new Unresolved(reference);
      for (const part of pointer === '' ? [] : pointer.split('/').slice(1)) {
        const key = part.replaceAll('~1', '/').replaceAll('~0', '~');
        // An array's members are its indices only (not `length`), written without a leading zero.
        const member = Array.isArray(found) ? /^(0|[1-9][0-9]*)$/.test(key) && Number(key) < found.length : own(found, key);
        if (!member) throw new Unresolved(reference);
        found = found[key];
      }
      // Only a string is a format; every `{}` of it is filled, as every host's runner does.
      if (typeof value.format !== 'string') return found;
      return value.format.replaceAll('{}', () => (typeof found === 'string' ? found : stringifyJson(found)));
    }
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, resolve(v, responses)]));
  }
  return value;
}

function content(spec) {
  if (typeof spec.text === 'string') return encoder.encode(spec.text);
  if (spec.repeat) return encoder.encode(spec.repeat.text.repeat(spec.repeat.times));
  throw new Error('content is {"text"} or {"repeat": {"text", "times"}}');
}

// KernelError's message is "<code>: <kernel message>"; its detail goes in verbatim.
const errorLine = (i, e) =>
  `{"step":${i},"error":{"code":"${e.code}","detail":${e.detailJson},"message":${JSON.stringify(e.message)}}}`;

async function runFixture(fixture, path) {
  const instances = new Map();
  const responses = [];
  const saved = new Map();
  const lines = [];
  for (const [i, step] of fixture.steps.entries()) {
    const name = step.instance ?? 'a';
    // A step whose reference points at nothing is written down as such; the steps after it still run.
    let resolved;
    try {
      resolved = step.action ? step.key && resolve(step.key, responses) : resolve(step.request, responses);
    } catch (e) {
      if (!(e instanceof Unresolved)) throw e;
      responses.push(null);
      lines.push(`{"step":${i},"unresolved":${JSON.stringify(e.reference)}}`);
      continue;
    }
    if (step.action) {
      const raw = await SqliteStore.open(path);
      const key = () => resolved;
      const put = (k, v) => raw.put(k, v, undefined);
      switch (step.action) {
        case 'reload':
          instances.get(name)?.store.close();
          instances.delete(name);
          break;
        case 'corrupt': {
          const value = Uint8Array.from(raw.get(key()).value);
          value[(step.offset ?? 0) % Math.max(value.length, 1)] ^= 0x01;
          put(key(), value);
          break;
        }
        case 'replace': {
          const text = new TextDecoder().decode(raw.get(key()).value);
          put(key(), encoder.encode(text.replace(step.find, () => step.with)));
          break;
        }
        case 'write':
          put(key(), encoder.encode(step.text ?? ''));
          break;
        case 'remove':
          raw.remove(key(), undefined);
          break;
        case 'snapshot':
          saved.set(step.as, raw.get(key())?.value ?? new Uint8Array());
          break;
        case 'restore':
          put(key(), saved.get(step.from) ?? new Uint8Array());
          break;
        default:
          throw new Error(`step ${i}: unknown action ${step.action}`);
      }
      raw.close();
      responses.push(null);
      lines.push(`{"step":${i},"action":${JSON.stringify(step.action)}}`);
      continue;
    }
    const request = typeof resolved === 'string' ? resolved : stringifyJson(resolved);
    if (!instances.has(name)) instances.set(name, new Kernel(await SqliteStore.open(path)));
    const kernel = instances.get(name);
    // The kernel's JSON goes into the transcript verbatim, never parsed and written again.
    let line;
    try {
      if (step.command === 'get-content') {
        const bytes = kernel.getContent(request);
        line = `{"step":${i},"bytes":{"length":${bytes.length},"sha256":"${sha256(bytes)}"}}`;
      } else {
        const bytes = step.command === 'put-content' ? content(step.content) : undefined;
        line = `{"step":${i},"ok":${kernel.call(step.command, request, bytes)}}`;
      }
    } catch (e) {
      if (!(e instanceof KernelError)) throw e;
      line = errorLine(i, e);
    }
    responses.push(parseJson(line).ok ?? null);
    lines.push(line);
  }
  for (const kernel of instances.values()) kernel.store.close();
  return lines.map((l) => l + '\n').join('');
}

function dump(path) {
  const store = new SqliteStore(new Database(path));
  let text = '';
  let after = '';
  for (;;) {
    const page = store.scan('', after, 1000);
    for (const e of page) text += `{"key":${JSON.stringify(e.key)},"revision":${e.revision},"sha256":"${sha256(e.value)}"}\n`;
    if (page.length < 1000) break;
    after = page[page.length - 1].key;
  }
  store.close();
  return text;
}

for (const file of fixtures) {
  // Parsed without loss, so a request object's integers reach the kernel as written.
  const fixture = parseJson(readFileSync(file, 'utf8'));
  if (read) {
    // Another host wrote this store file: open it here, ask the kernel, dump it.
    const path = join(read, `${fixture.name}.sqlite`);
    const kernel = new Kernel(new SqliteStore(new Database(path)));
    const info = `{"step":0,"ok":${kernel.call('info', '{"schemaVersion":1}')}}`;
    kernel.store.close();
    writeFileSync(join(out, `${fixture.name}.read.jsonl`), `${info}\n${dump(path)}`);
    continue;
  }
  const path = join(out, `${fixture.name}.sqlite`);
  for (const suffix of ['', '-wal', '-shm']) rmSync(path + suffix, { force: true });
  writeFileSync(join(out, `${fixture.name}.transcript.jsonl`), await runFixture(fixture, path));
  writeFileSync(join(out, `${fixture.name}.dump.jsonl`), dump(path));
}
