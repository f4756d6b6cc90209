// The scenario through the installed tarball, from an ES module: `node smoke.mjs SCENARIO OUT STORE`.
import * as ctxkernel from 'ctxkernel';
import { replay } from './replay.mjs';

await replay(ctxkernel, process.argv.slice(2));
