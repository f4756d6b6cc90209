// CommonJS entry: `const { Kernel } = await require('ctxkernel').load();`
export function load(): Promise<typeof import('./index.js')>;
