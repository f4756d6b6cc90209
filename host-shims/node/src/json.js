// JSON without loss: JavaScript numbers hold integers exactly only up to
// 2^53 − 1, so larger ones cross as BigInts.

import { isInteger, parse as parseLossless, stringify as stringifyLossless } from 'lossless-json';

/** Integers beyond 2^53 − 1 become BigInts, so none is silently rounded. */
const parseNumber = (text) => {
  const number = Number(text);
  return isInteger(text) && !Number.isSafeInteger(number) ? BigInt(text) : number;
};
// Only a run of 16 or more digits can hold an unsafe integer; JSON.parse is exact for the rest.
const LONG_DIGITS = /\d{16}/;

/** JSON text to values without loss: integers beyond 2^53 − 1 come back as BigInts. */
export const parseJson = (text) => (LONG_DIGITS.test(text) ? parseLossless(text, null, parseNumber) : JSON.parse(text));

/** Values to JSON text without loss: BigInts are written as integers. `replacer` as JSON.stringify's. */
export function stringifyJson(value, replacer) {
  try {
    return JSON.stringify(value, replacer);
  } catch (e) {
    // JSON.stringify refuses a BigInt with a TypeError; only then pay for the slower writer.
    if (e instanceof TypeError) return stringifyLossless(value, replacer);
    throw e;
  }
}

/**
 * The exact text of one member of the kernel's JSON object text. The
 * kernel writes canonical JSON, no whitespace between tokens, so a value
 * ends at the bracket that closes it, the quote that closes it, or (a
 * number, `true`, `false`, `null`) the comma or brace after it.
 */
export function memberText(text, name) {
  let at = 1;
  while (at < text.length && text[at] !== '}') {
    const keyEnd = valueEnd(text, at);
    const end = valueEnd(text, keyEnd + 1);
    if (JSON.parse(text.slice(at, keyEnd)) === name) return text.slice(keyEnd + 1, end);
    at = end + (text[end] === ',' ? 1 : 0);
  }
  throw new Error(`the response has no \`${name}\``);
}

/** Where the JSON value starting at `at` ends. */
function valueEnd(text, at) {
  let depth = 0;
  for (let i = at; i < text.length; i++) {
    const c = text[i];
    if (c === '"') {
      for (i++; i < text.length && text[i] !== '"'; i++) if (text[i] === '\\') i++;
      if (depth === 0) return i + 1;
    } else if (c === '{' || c === '[') {
      depth++;
    } else if (c === '}' || c === ']' || (c === ',' && depth === 0)) {
      if (depth === 0) return i;
      if (--depth === 0) return i + 1;
    }
  }
  return text.length;
}
