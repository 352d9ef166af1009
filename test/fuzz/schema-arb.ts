/**
 * Request bodies from JSON Schemas: values that are valid or nearly valid (one to three
 * mutations away: wrong types, boundary lengths, nulls, extra or missing properties, nasty text),
 * and raw JSON texts that JSON.stringify cannot produce (huge number literals, duplicate keys, a
 * BOM, comments, 10,000 levels of nesting) or bytes that are not UTF-8 at all.
 *
 * The schemas come from GET /v1/openapi.json (or the TypeBox schemas of the dashboard routes),
 * so a field added to a route is fuzzed without touching this file.
 */
import fc from 'fast-check';
import {
  BOUNDARY_LENGTHS,
  base64Like,
  dateLike,
  domainLike,
  emailLike,
  eventTypeLike,
  headerNameLike,
  idLike,
  label,
  local,
  mailboxLike,
  nastyString,
  nastyValue,
  toJson,
  urlLike,
} from './arbitraries.ts';

/** The subset of JSON Schema the route schemas use. */
export interface Schema {
  type?: string | string[];
  properties?: Record<string, Schema>;
  required?: string[];
  additionalProperties?: boolean | Schema;
  items?: Schema;
  enum?: unknown[];
  const?: unknown;
  anyOf?: Schema[];
  minLength?: number;
  maxLength?: number;
  minItems?: number;
  maxItems?: number;
  minimum?: number;
  maximum?: number;
  maxProperties?: number;
  format?: string;
}

/** Values a careful client would send for a field (the starting point of the mutations). */
const cleanText = (min: number, max: number) => fc.string({ minLength: Math.max(min, 1), maxLength: Math.max(max, 1) });
const cleanEmail = fc.tuple(local, label).map(([l, d]) => `${l}@${d}.example.com`);
const CLEAN: Record<string, fc.Arbitrary<unknown>> = {
  email: cleanEmail,
  recipient: cleanEmail,
  identifier: cleanEmail,
  from: fc.constantFrom('Shop <shop@example.com>', 'shop@example.com', '"Shop, Inc." <news@mail.example.com>'),
  reply_to: cleanEmail,
  url: fc.constantFrom('http://127.0.0.1:9/hook', 'https://127.0.0.1:9/a?b=c'),
  // A valid domain makes a 2048-bit DKIM key: keep those rare even among clean values.
  domain: fc.oneof({ arbitrary: domainLike, weight: 1 }, { arbitrary: fc.constant('not a domain'), weight: 3 }),
  data: fc.uint8Array({ maxLength: 48 }).map((b) => Buffer.from(b).toString('base64')),
  content_type: fc.constantFrom('application/pdf', 'text/plain; charset=utf-8', 'image/png'),
  events: fc.constantFrom('*', 'message.delivered', 'message.bounced', 'message.opened'),
  start_time: fc.constant(undefined),
  template_id: fc.constant(undefined),
};

/** A field-specific value, by property name; null when the name means nothing special. */
function semantic(name: string, clean: boolean): fc.Arbitrary<unknown> | null {
  if (clean) return CLEAN[name] ?? null;
  switch (name) {
    case 'email':
    case 'recipient':
      return emailLike;
    case 'identifier':
      return fc.oneof(emailLike, domainLike);
    case 'from':
    case 'reply_to':
      return mailboxLike;
    case 'url':
      return urlLike;
    case 'domain':
      return fc.oneof({ arbitrary: domainLike, weight: 1 }, { arbitrary: nastyString, weight: 6 });
    case 'data':
      return base64Like;
    case 'start_time':
    case 'to':
      return dateLike;
    case 'events':
      return eventTypeLike;
    case 'content_type':
      return fc.constantFrom('application/pdf', 'text/plain; charset=utf-8', 'x', 'text/html\r\nX: y', '');
    case 'template_id':
    case 'transmission_id':
    case 'message_id':
    case 'cursor':
      return idLike;
    default:
      return null;
  }
}

// ---- schema -> values --------------------------------------------------------------------------

function typeOf(s: Schema): string | undefined {
  return Array.isArray(s.type) ? s.type[0] : s.type;
}

/**
 * Values that satisfy `schema` structurally. `clean`: what a careful client sends (mostly valid
 * all the way through); otherwise field values are chosen to look right, not to be right.
 */
export function fromSchema(schema: Schema, clean: boolean, name = ''): fc.Arbitrary<unknown> {
  if (schema.enum) return fc.constantFrom(...schema.enum);
  if (schema.const !== undefined) return fc.constant(schema.const);
  if (schema.anyOf) return fc.oneof(...schema.anyOf.map((s) => fromSchema(s, clean, name)));
  const special = semantic(name, clean);
  switch (typeOf(schema)) {
    case 'string': {
      if (special) return special;
      if (schema.format === 'date-time') return clean ? fc.constant(undefined) : dateLike;
      const min = schema.minLength ?? 0;
      const max = Math.max(min, Math.min(schema.maxLength ?? 40, 40));
      if (clean) return cleanText(min, max);
      return fc.oneof(
        { arbitrary: cleanText(min, max), weight: 4 },
        { arbitrary: fc.string({ unit: 'grapheme', minLength: min, maxLength: max }), weight: 2 },
        { arbitrary: nastyString, weight: 2 },
      );
    }
    case 'integer':
      return fc.integer({ min: schema.minimum ?? -1000, max: schema.maximum ?? 1000 });
    case 'number':
      return fc.double({ noNaN: true, noDefaultInfinity: true });
    case 'boolean':
      return fc.boolean();
    case 'null':
      return fc.constant(null);
    case 'array': {
      const item = special ?? (schema.items ? fromSchema(schema.items, clean, name) : nastyValue);
      const min = schema.minItems ?? 0;
      return fc.array(item, { minLength: min, maxLength: Math.max(min, Math.min(schema.maxItems ?? 3, 3)) });
    }
    case 'object': {
      if (schema.properties) {
        const model: Record<string, fc.Arbitrary<unknown>> = {};
        for (const [k, s] of Object.entries(schema.properties)) model[k] = fromSchema(s, clean, k);
        return fc.record(model, { requiredKeys: schema.required ?? [] });
      }
      const value =
        typeof schema.additionalProperties === 'object' && Object.keys(schema.additionalProperties).length > 0
          ? fromSchema(schema.additionalProperties, clean)
          : fc.jsonValue({ maxDepth: 2, ...(clean ? {} : { stringUnit: 'binary' as const }) });
      const key =
        name === 'headers'
          ? clean
            ? fc.stringMatching(/^X-[A-Za-z0-9]{1,10}$/)
            : headerNameLike
          : clean
            ? fc.stringMatching(/^[a-z][a-z0-9_]{0,10}$/)
            : fc.oneof(fc.string({ maxLength: 12 }), nastyString);
      return fc.dictionary(key, value, { maxKeys: clean ? 3 : 4 });
    }
    default:
      return special ?? nastyValue;
  }
}

// ---- mutations: valid -> nearly valid ----------------------------------------------------------

type Path = (string | number)[];

function allPaths(v: unknown, p: Path = [], out: Path[] = []): Path[] {
  out.push(p);
  if (p.length > 8) return out;
  if (Array.isArray(v)) {
    for (const [i, x] of v.entries()) allPaths(x, [...p, i], out);
  } else if (v && typeof v === 'object') for (const [k, x] of Object.entries(v)) allPaths(x, [...p, k], out);
  return out;
}

export const MUTATION_KINDS = [
  'text',
  'replace',
  'delete',
  'extra',
  'wrap',
  'stringify',
  'long',
  'many',
  'nullify',
  'number',
] as const;
export interface Mutation {
  kind: (typeof MUTATION_KINDS)[number];
  at: number;
  value: unknown;
  text: string;
  key: string;
  n: number;
}

const mutationArb: fc.Arbitrary<Mutation> = fc.record({
  kind: fc.oneof(
    { arbitrary: fc.constant('text' as const), weight: 3 },
    { arbitrary: fc.constantFrom(...MUTATION_KINDS), weight: 7 },
  ),
  text: nastyString,
  at: fc.nat(),
  value: nastyValue,
  key: fc.oneof(fc.constantFrom('__proto__', 'constructor', 'prototype', 'extra', ''), nastyString),
  n: fc.constantFrom(...BOUNDARY_LENGTHS, 11, 21, 51, 201, 1001, 10_001),
});

function mutatedValue(m: Mutation, old: unknown): unknown {
  switch (m.kind) {
    case 'replace':
      return m.value;
    case 'text':
      return m.text;
    case 'wrap':
      return m.n % 2 ? [old] : { value: old };
    case 'stringify':
      return JSON.stringify(old) ?? 'undefined';
    case 'long':
      return typeof old === 'string' && old.length > 0
        ? old.repeat(Math.ceil(m.n / old.length)).slice(0, m.n)
        : 'x'.repeat(m.n);
    case 'many':
      return Array.from({ length: Math.min(m.n, 10_001) }, () => (Array.isArray(old) ? (old[0] ?? 'x') : old));
    case 'nullify':
      return null;
    case 'number':
      return [0, -1, 1, m.n, -m.n, m.n + 0.5, 2 ** 53 + 2, 1e308][m.at % 8];
    default:
      return old;
  }
}

/** Applies `m` to a copy-on-write of `root`; the path is chosen by `m.at` among every node. */
export function applyMutation(root: unknown, m: Mutation): unknown {
  let paths = allPaths(root);
  if (m.kind === 'text') {
    // Only string leaves: the value stays a string, so it travels past the type checks.
    const strings = paths.filter(
      (p) => typeof p.reduce<unknown>((v, k) => (v as Record<string, unknown>)?.[k], root) === 'string',
    );
    if (strings.length) paths = strings;
  }
  const path = paths[m.at % paths.length] ?? [];
  const edit = (node: unknown, rest: Path): unknown => {
    if (rest.length === 0) {
      if (m.kind === 'extra' && node && typeof node === 'object' && !Array.isArray(node)) {
        const copy: Record<string, unknown> = { ...(node as Record<string, unknown>) };
        Object.defineProperty(copy, m.key, { value: m.value, enumerable: true, configurable: true, writable: true });
        return copy;
      }
      return mutatedValue(m, node);
    }
    const [head, ...tail] = rest;
    if (Array.isArray(node)) {
      const copy = [...node];
      if (tail.length === 0 && m.kind === 'delete') copy.splice(Number(head), 1);
      else copy[Number(head)] = edit(copy[Number(head)], tail);
      return copy;
    }
    const copy: Record<string, unknown> = { ...(node as Record<string, unknown>) };
    if (tail.length === 0 && m.kind === 'delete') delete copy[String(head)];
    else copy[String(head)] = edit(copy[String(head)], tail);
    return copy;
  };
  return edit(root, path);
}

/** Bodies derived from `schema`: mostly a few mutations away from valid, sometimes valid. */
export function nearValid(schema: Schema): fc.Arbitrary<unknown> {
  const start = fc.oneof(
    { arbitrary: fromSchema(schema, true), weight: 3 },
    { arbitrary: fromSchema(schema, false), weight: 1 },
  );
  return fc
    .tuple(
      start,
      fc.oneof(
        { arbitrary: fc.constant([]), weight: 2 },
        { arbitrary: fc.array(mutationArb, { minLength: 1, maxLength: 1 }), weight: 4 },
        { arbitrary: fc.array(mutationArb, { minLength: 2, maxLength: 3 }), weight: 2 },
      ),
    )
    .map(([valid, ms]) => ms.reduce<unknown>((v, m) => applyMutation(v, m), valid));
}

// ---- raw bodies: what JSON.stringify never writes ----------------------------------------------

const RAW_EDITS = [
  'bigNumber',
  'infinity',
  'dupKey',
  'bom',
  'trailing',
  'truncate',
  'comment',
  'singleQuotes',
  'deep',
  'none',
] as const;

/** A JSON text of `value`, then edited at the text level. */
export function rawJsonText(value: unknown): fc.Arbitrary<string> {
  const text = toJson(value);
  return fc.tuple(fc.constantFrom(...RAW_EDITS), fc.nat()).map(([edit, n]) => {
    const numbers = [...text.matchAll(/-?\d+(\.\d+)?([eE][+-]?\d+)?/g)];
    const num = numbers.length ? numbers[n % numbers.length] : undefined;
    const replaceNum = (by: string) =>
      num?.index !== undefined ? `${text.slice(0, num.index)}${by}${text.slice(num.index + num[0].length)}` : text;
    switch (edit) {
      case 'bigNumber':
        return replaceNum('123456789012345678901234567890');
      case 'infinity':
        return replaceNum(['1e999', '-1e999', '1E400', '1e-400', '-0.0'][n % 5] ?? '1e999');
      case 'dupKey':
        return text.startsWith('{"') ? text.replace(/^\{("[^"]*"):/, '{$1:null,$1:') : text;
      case 'bom':
        return `\ufeff${text}`;
      case 'trailing':
        return `${text}${[',', '}', ' x', '\0', '\n{}'][n % 5]}`;
      case 'truncate':
        return text.slice(0, n % Math.max(text.length, 1));
      case 'comment':
        return text.replace(/^\{/, '{/* c */');
      case 'singleQuotes':
        return text.replace(/"/g, "'");
      case 'deep': {
        // A scalar value (not a key) becomes an array nested 10,000+ levels deep.
        const scalars = [
          ...text.matchAll(/"(?:[^"\\]|\\.)*"(?!\s*:)|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null/g),
        ];
        const at = scalars.length ? scalars[n % scalars.length] : undefined;
        const depth = 10_000 + (n % 5000);
        const deep = `${'['.repeat(depth)}${']'.repeat(depth)}`;
        return at?.index !== undefined
          ? `${text.slice(0, at.index)}${deep}${text.slice(at.index + at[0].length)}`
          : deep;
      }
      default:
        return text;
    }
  });
}

/** Bytes that are not valid UTF-8 JSON at all. */
export const rawBytes: fc.Arbitrary<Buffer> = fc.oneof(
  fc.uint8Array({ maxLength: 64 }).map((b) => Buffer.from(b)),
  fc.constantFrom(
    Buffer.from([0xff, 0xfe, 0x7b, 0x00, 0x7d, 0x00]),
    Buffer.from('{"name":"\xff\xfe"}', 'latin1'),
    Buffer.from('{"name":"\xc3"}', 'latin1'),
    Buffer.from('{"name":"\xed\xa0\x80"}', 'latin1'),
    Buffer.from(''),
    Buffer.from('   '),
    Buffer.from('null'),
  ),
);
