// CommonJS entry (VS Code extensions are often CommonJS): the kernel loads its
// component asynchronously, so load the ES module once and use it.
//
//   const { load } = require('ctxkernel');
//   const { Kernel, SqliteStore } = await load();
module.exports = { load: () => import('./index.js') };
