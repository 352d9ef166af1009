import type { Pacer } from './pacer.ts';

/**
 * Canonical JSON: object keys sorted recursively, no whitespace. Two bodies that differ only in
 * key order or formatting produce the same string, which is what idempotency fingerprints need.
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  const obj = value as Record<string, unknown>;
  const keys = Object.keys(obj)
    .filter((k) => obj[k] !== undefined)
    .sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(obj[k])}`).join(',')}}`;
}

/**
 * canonicalJson for big bodies (a 10,000-recipient transmission took ~40 ms of one synchronous
 * stretch): the top two levels are walked here, each value below them is serialized whole, and
 * the pacer gives the event loop a turn between them about every 10 ms. Same output.
 */
export async function canonicalJsonPaced(value: unknown, pace: Pacer, depth = 0): Promise<string> {
  if (depth >= 2 || value === null || typeof value !== 'object') {
    const text = canonicalJson(value);
    await pace.tick();
    return text;
  }
  if (Array.isArray(value)) {
    const parts: string[] = [];
    for (const item of value) parts.push(await canonicalJsonPaced(item, pace, depth + 1));
    return `[${parts.join(',')}]`;
  }
  const obj = value as Record<string, unknown>;
  const keys = Object.keys(obj)
    .filter((k) => obj[k] !== undefined)
    .sort();
  const parts: string[] = [];
  for (const k of keys) parts.push(`${JSON.stringify(k)}:${await canonicalJsonPaced(obj[k], pace, depth + 1)}`);
  return `{${parts.join(',')}}`;
}
