/**
 * An example value for a JSON Schema of the OpenAPI document, for the operations whose module
 * gives none of its own (route config `openapi`): the schema's own `examples`/`default`/`enum`
 * first, then a value that fits its type, format and bounds, named after the property where
 * that says more (`*_at` a timestamp, `id` a UUID, `email` an address). Every example the
 * document carries is checked against its schema by Redocly's lint (npm run lint:openapi).
 */
type Schema = Record<string, unknown>;

const NOW = '2026-11-26T10:00:00.000Z';
const UUID = '0193a5b2-7c1e-7d4a-9f3b-2c8e4d6a1b90';

/** Values that read as real ones, by property name (only used where the schema's type fits). */
const NAMED: Record<string, string | number> = {
  from: 'Shop <news@mail.example.com>',
  reply_to: 'support@example.com',
  subject: 'Your order, {{first_name}}',
  text: 'Hello {{first_name}}, your order has shipped.',
  html: '<p>Hello {{first_name}}, your order has shipped.</p>',
  secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
  key: 'pyk_3kT9vQm2LxW8pR4nZ6yB1cD5fG7hJ0sA2eU4iO6kM8q',
  key_prefix: 'pyk_3kT9',
  password: 'Vq8RkL2mXp9TzW4n',
  username: 'smtp-0193a5b2',
  scope: 'send:transmissions',
  event: 'message.delivered',
  dkim_selector: 'pyd1',
  return_path_domain: 'bounces.mail.example.com',
  next_cursor: 'eyJ0IjoiMjAyNi0xMS0yNlQxMDowMDowMloifQ.c2ln',
  cursor: 'eyJ0IjoiMjAyNi0xMS0yNlQxMDowMDowMloifQ.c2ln',
  value: 'v=DKIM1; k=rsa; p=MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA0u7l...',
  address: '192.0.2.25',
  source_address: '192.0.2.25',
  mx: 'mx1.example.com',
  mx_host: 'mx1.example.com',
  tracking_hostname: 'click.mail.example.com',
  file: 'identifier,type,reason_category\nann@example.com,email,manual\n',
  reason: 'hard_bounce',
  until: '2026-11-26T11:00:00.000Z',
  status_code: 200,
  duration_ms: 120,
  version: 1,
};
/** Nullable properties shown as null: an example of the usual case. */
const USUALLY_NULL = /(^error$|_reason$|^last_used_at$|^description$)/;

function byName(name: string): unknown {
  if (name in NAMED) return NAMED[name];
  if (name === 'id' || name.endsWith('_id')) return UUID;
  if (name.endsWith('_at')) return NOW;
  if (name === 'email' || name === 'recipient' || name === 'identifier') return 'ann@example.com';
  if (name === 'url') return 'https://hooks.example.com/postyard';
  if (name === 'domain' || name === 'name') return name === 'domain' ? 'mail.example.com' : 'example';
  return undefined;
}

function stringFor(s: Schema, name: string): string {
  const named = byName(name);
  if (typeof named === 'string') return named;
  switch (s.format) {
    case 'date-time':
      return NOW;
    case 'uuid':
      return UUID;
    case 'email':
      return 'ann@example.com';
    case 'uri':
    case 'url':
      return 'https://example.com/';
    case 'date':
      return NOW.slice(0, 10);
  }
  const min = typeof s.minLength === 'number' ? s.minLength : 0;
  const text = name ? name.replace(/_/g, ' ') : 'text';
  return text.length >= min ? text : text.padEnd(min, 'x');
}

export function exampleOf(
  schema: unknown,
  resolve: (ref: string) => unknown,
  opts: { requiredOnly?: boolean; name?: string; depth?: number } = {},
): unknown {
  const name = opts.name ?? '';
  const depth = opts.depth ?? 0;
  if (!schema || typeof schema !== 'object' || depth > 12) return null;
  const s = schema as Schema;
  if (typeof s.$ref === 'string') return exampleOf(resolve(s.$ref), resolve, opts);
  if (Array.isArray(s.examples) && s.examples.length > 0) return s.examples[0];
  if (s.example !== undefined) return s.example;
  if (s.const !== undefined) return s.const;
  if (s.default !== undefined) return s.default;
  if (Array.isArray(s.enum) && s.enum.length > 0) return s.enum[0];
  for (const key of ['anyOf', 'oneOf'] as const) {
    const list = s[key];
    if (Array.isArray(list) && list.length > 0) {
      // A nullable field shows its value, not null, unless null is its usual state.
      const nullable = list.some((x) => (x as Schema)?.type === 'null');
      if (nullable && USUALLY_NULL.test(name)) return null;
      const pick = list.find((x) => (x as Schema)?.type !== 'null') ?? list[0];
      return exampleOf(pick, resolve, { ...opts, depth: depth + 1 });
    }
  }
  if (Array.isArray(s.allOf)) {
    return Object.assign({}, ...s.allOf.map((x) => exampleOf(x, resolve, { ...opts, depth: depth + 1 }) as object));
  }
  const type = Array.isArray(s.type) ? (s.type.find((t) => t !== 'null') ?? s.type[0]) : s.type;
  switch (type) {
    case 'object': {
      const props = (s.properties ?? {}) as Record<string, unknown>;
      const required = new Set(Array.isArray(s.required) ? (s.required as string[]) : []);
      const out: Record<string, unknown> = {};
      for (const [key, sub] of Object.entries(props)) {
        if (opts.requiredOnly && !required.has(key)) continue;
        out[key] = exampleOf(sub, resolve, { ...opts, name: key, depth: depth + 1 });
      }
      return out;
    }
    case 'array': {
      const n = Math.max(1, typeof s.minItems === 'number' ? s.minItems : 1);
      return Array.from({ length: n }, () =>
        exampleOf(s.items, resolve, { ...opts, name: name.replace(/s$/, ''), depth: depth + 1 }),
      );
    }
    case 'string':
      return stringFor(s, name);
    case 'integer':
    case 'number': {
      const named = byName(name);
      if (typeof named === 'number') return named;
      const min =
        typeof s.minimum === 'number' ? s.minimum : typeof s.exclusiveMinimum === 'number' ? s.exclusiveMinimum + 1 : 1;
      const max = typeof s.maximum === 'number' ? s.maximum : Number.POSITIVE_INFINITY;
      return Math.min(Math.max(min, 1), max);
    }
    case 'boolean':
      return true;
    case 'null':
      return null;
  }
  const named = byName(name);
  return named === undefined ? {} : named;
}
