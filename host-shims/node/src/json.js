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
