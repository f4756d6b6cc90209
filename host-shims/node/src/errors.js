// The one error every command raises, carrying the kernel's code.

import { parseJson } from './json.js';

/**
 * The one error every command raises: the kernel's code, message and detail.
 * `code` is the kernel's kebab-case code (`invalid-request`); the message
 * does not repeat it. `detailJson` is the kernel's detail text, byte for
 * byte; `detail` is it parsed.
 */
export class KernelError extends Error {
  constructor(code, message, detailJson = '{}', options) {
    super(message, options);
    this.name = 'KernelError';
    this.code = code;
    this.detailJson = detailJson || '{}';
    this.detail = parseJson(this.detailJson);
  }
}
