/**
 * Completes the document @fastify/swagger generates from the route schemas: per operation the
 * scope it needs (`x-required-scope` and a bearer security requirement per accepted scope), the
 * response headers (X-Request-ID, RateLimit-*, Retry-After, Idempotent-Replayed), every error
 * status with the error codes it can carry and an example per code, a 503 for shutdown or an
 * unreachable database and a 507 for a full one, an example for every request and response (the
 * module's own from route config `openapi`, else one made from the schema), a description; and for the document the tags, the license and the
 * `webhooks`. Route modules only declare; nothing here knows a route by name.
 */
import type { ErrorCode } from '../../lib/errors.ts';
import { errorResponseDoc, type OperationTraits } from './errors-doc.ts';
import { exampleOf } from './example-of.ts';

/** The document's `webhooks` (the POSTs a webhook receives), given the `$ref` of the Event schema. */
export type WebhooksDoc = (eventRef: string) => Record<string, unknown>;

/** What a route module may add for its operation (route config `openapi`). */
export interface RouteDocs {
  /** The request body example (a JSON body; the first media type when there are several). */
  request?: unknown;
  /** Response body examples by status. */
  responses?: Record<number, unknown>;
  /** Error codes beyond the common ones this operation can answer. */
  errors?: readonly ErrorCode[];
}

export interface RouteInfo {
  scopes: readonly string[];
  docs: RouteDocs;
}

type Json = Record<string, unknown>;
type Operation = Json & {
  operationId?: string;
  summary?: string;
  description?: string;
  tags?: string[];
  parameters?: Json[];
  requestBody?: { content?: Record<string, Json> };
  responses: Record<string, Json & { content?: Record<string, Json>; headers?: Json }>;
};

export const TAGS: { name: string; description: string }[] = [
  {
    name: 'Transmissions',
    description: 'Send mail: accept a transmission, read its messages and their delivery attempts.',
  },
  { name: 'Events', description: 'What happened to each message (accepted, delivered, bounced, opened, ...).' },
  { name: 'Webhooks', description: 'Endpoints that receive events as signed POSTs (see Webhook events).' },
  { name: 'Suppressions', description: 'Addresses and domains mail is never (or, for marketing, no longer) sent to.' },
  { name: 'Templates', description: 'Stored, versioned content sent by template_id.' },
  { name: 'Sending domains', description: 'Domains mail is sent from: DKIM key, DNS records, verification.' },
  { name: 'API keys', description: 'Keys of this tenant and their scopes.' },
  { name: 'SMTP credentials', description: 'Usernames and passwords for SMTP submission.' },
  { name: 'Tracking', description: 'Open and click tracking defaults per mail type.' },
  {
    name: 'IP pools',
    description: "Groups of this host's source addresses mail leaves from, by weight and mail type.",
  },
  { name: 'Warmup policies', description: 'Daily and hourly limits per source address while it warms up.' },
  { name: 'Pacing', description: 'Per destination site limits for this tenant, and active automation suspensions.' },
  { name: 'Webhook events', description: 'The POSTs Postyard makes to webhook URLs, one per event type.' },
];

const HEADERS: Record<string, Json> = {
  'X-Request-ID': {
    description: 'Identifies this request in the server logs (sent on every answer).',
    schema: { type: 'string' },
    example: 'req-01JDXK2P7Q',
  },
  'RateLimit-Limit': {
    description: 'Requests allowed in the current window for this key and tenant (the tighter of the two).',
    schema: { type: 'integer' },
    example: 100,
  },
  'RateLimit-Remaining': {
    description: 'Requests left in the current window.',
    schema: { type: 'integer' },
    example: 99,
  },
  'RateLimit-Reset': { description: 'Seconds until the window resets.', schema: { type: 'integer' }, example: 1 },
  'Retry-After': { description: 'Seconds to wait before retrying.', schema: { type: 'integer' }, example: 1 },
  'Idempotent-Replayed': {
    description:
      'Present (`true`) when this answer is the stored answer to an earlier request with the same Idempotency-Key.',
    schema: { type: 'string', enum: ['true'] },
    example: 'true',
  },
};
const ref = (name: string) => ({ $ref: `#/components/headers/${name}` });

function resolver(doc: Json) {
  return (pointer: string): unknown => {
    if (!pointer.startsWith('#/')) return undefined;
    let node: unknown = doc;
    for (const part of pointer.slice(2).split('/'))
      node = (node as Json | undefined)?.[part.replace(/~1/g, '/').replace(/~0/g, '~')];
    return node;
  };
}

function camel(words: string[]): string {
  return words
    .filter(Boolean)
    .map((w, i) => (i === 0 ? w : w.charAt(0).toUpperCase() + w.slice(1)))
    .join('');
}

/** For an operation whose module names none: `<method><Path words>`, unique by construction. */
function derivedOperationId(method: string, path: string): string {
  const words = path
    .split('/')
    .filter((p) => p && p !== 'v1')
    .flatMap((p) => (p.startsWith('{') ? ['by', p.slice(1, -1)] : p.split(/[-_]/)));
  return camel([method, ...words]);
}

export function enrichDocument(doc: Json, routes: ReadonlyMap<string, RouteInfo>, webhooksDoc?: WebhooksDoc): Json {
  const resolve = resolver(doc);
  const components = (doc.components ??= {}) as Json;
  components.headers = { ...((components.headers as Json) ?? {}), ...HEADERS };
  const used = new Set<string>();
  for (const [path, item] of Object.entries(doc.paths as Record<string, Record<string, Operation>>)) {
    for (const [method, op] of Object.entries(item)) {
      const info = routes.get(`${method.toUpperCase()} ${path}`);
      const scopes = info?.scopes ?? [];
      const docs = info?.docs ?? {};
      op.operationId ??= derivedOperationId(method, path);
      for (const t of op.tags ?? []) used.add(t);
      const header = (name: string) =>
        op.parameters?.some((p) => p.in === 'header' && String(p.name).toLowerCase() === name) ?? false;
      const traits: OperationTraits = {
        keyed: header('idempotency-key'),
        paged: op.parameters?.some((p) => p.in === 'query' && p.name === 'cursor') ?? false,
        extra: docs.errors ?? [],
      };
      if (scopes.length) {
        op['x-required-scope'] = scopes.length === 1 ? scopes[0] : [...scopes];
        // Alternatives: any one of the scopes grants access (src/http/plugins/auth.ts).
        op.security = scopes.map((s) => ({ bearer: [s] }));
      }
      const scopeText = scopes.length ? `Required scope: ${scopes.map((s) => `\`${s}\``).join(' or ')}.` : '';
      op.description = [op.description ?? op.summary ?? '', scopeText].filter(Boolean).join('\n\n');
      // Every operation can be cut short by a shutdown or an unreachable database (503), or by a
      // full database (507: src/db/faults.ts).
      for (const status of ['503', '507'])
        op.responses[status] ??= {
          description: '',
          content: { 'application/json': { schema: { $ref: '#/components/schemas/ErrorBody' } } },
        };
      for (const [status, res] of Object.entries(op.responses)) {
        const code = Number(status);
        const headers: Json = { 'X-Request-ID': ref('X-Request-ID') };
        if (code !== 401) {
          headers['RateLimit-Limit'] = ref('RateLimit-Limit');
          headers['RateLimit-Remaining'] = ref('RateLimit-Remaining');
          headers['RateLimit-Reset'] = ref('RateLimit-Reset');
        }
        if (code === 429 || code === 503 || code === 507) headers['Retry-After'] = ref('Retry-After');
        if (traits.keyed && code >= 200 && code < 300) headers['Idempotent-Replayed'] = ref('Idempotent-Replayed');
        res.headers = { ...(res.headers ?? {}), ...headers };
        const media = res.content?.['application/json'];
        if (code >= 400) {
          const e = errorResponseDoc(code, traits);
          res.description = e.description;
          res['x-error-codes'] = e.codes;
          if (media) media.examples = e.examples;
        } else if (media && media.example === undefined && media.examples === undefined) {
          media.example = docs.responses?.[code] ?? exampleOf(media.schema, resolve);
        }
      }
      const content = op.requestBody?.content ?? {};
      for (const [type, media] of Object.entries(content)) {
        if (media.example !== undefined || media.examples !== undefined) continue;
        const mine = type === 'application/json' ? docs.request : undefined;
        media.example = mine ?? exampleOf(media.schema, resolve, { requiredOnly: true });
      }
    }
  }
  doc.info = {
    ...(doc.info as Json),
    license: { name: 'MIT', identifier: 'MIT' },
  };
  const event = (components.schemas as Json | undefined)?.Event ? '#/components/schemas/Event' : null;
  if (event && webhooksDoc) {
    doc.webhooks = webhooksDoc(event);
    used.add('Webhook events');
  }
  const known = new Set(TAGS.map((t) => t.name));
  doc.tags = [
    ...TAGS.filter((t) => used.has(t.name)),
    ...[...used]
      .filter((t) => !known.has(t))
      .sort()
      .map((name) => ({ name, description: `${name} (see docs/api.md).` })),
  ];
  return doc;
}
