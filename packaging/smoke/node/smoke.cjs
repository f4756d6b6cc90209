// The scenario through the installed tarball, from CommonJS: `node smoke.cjs SCENARIO OUT STORE`.
const { load } = require('ctxkernel');

Promise.all([load(), import('./replay.mjs')]).then(([ctxkernel, { replay }]) => replay(ctxkernel, process.argv.slice(2)));
