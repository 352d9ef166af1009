import type { FastifyInstance } from 'fastify';
import { AppError, validationError } from '../lib/errors.ts';
import { Pacer, yieldToLoop } from '../lib/pacer.ts';
import { fieldPath } from './error-handler.ts';

/**
 * Rules every request holds to, checked after parsing and before schema validation (found by
 * the property-based tests in test/fuzz/):
 *
 * - A JSON body nests at most MAX_JSON_DEPTH levels; deeper is `400 invalid_json`. JSON.parse
 *   takes any depth, but the code behind it recurses (canonical JSON of idempotent requests,
 *   JSON.stringify when storing substitution_data): `{"x":[[[[...` 20,000 levels deep inside
 *   substitution_data overflowed the stack and answered 500.
 * - No string holds U+0000 (NUL), in the body (keys too), the query or the path. PostgreSQL text
 *   cannot store it ("invalid byte sequence for encoding UTF8: 0x00"), so e.g.
 *   `{"name":"a\u0000b"}` on POST /v1/api-keys answered 500 there (and was stored on SQLite),
 *   and `GET /v1/transmissions/%00` answered 500. Now: body 422 validation_failed naming the
 *   field, query 400 invalid_parameter, path 404 (like any unknown id).
 * - An HTTP/1.1 request carries a Host header (RFC 9112 section 3.2): else 400 invalid_request
 *   (Node's own check answered an empty body; it is turned off in server-options.ts).
 */
export const MAX_JSON_DEPTH = 64;

/** Bodies above this size (bytes) get event-loop turns between the steps that walk them whole. */
export const BIG_BODY_BYTES = 256 * 1024;

type Key = string | number;
type Finding = { tooDeep: true } | { nulAt: Key[] } | null;

interface Node {
  value: object;
  depth: number;
  parent: number;
  key: Key;
}

/** Breadth-first, without recursion (the input may be deeper than the stack). */
async function scan(root: unknown, pace?: Pacer): Promise<Finding> {
  if (!root || typeof root !== 'object') return typeof root === 'string' && root.includes('\0') ? { nulAt: [] } : null;
  const nodes: Node[] = [{ value: root, depth: 1, parent: -1, key: '' }];
  const pathTo = (i: number, last: Key): Key[] => {
    const path: Key[] = [last];
    for (let j = i; j > 0; j = nodes[j]?.parent ?? 0) path.push(nodes[j]?.key ?? '');
    return path.reverse();
  };
  for (let i = 0; i < nodes.length; i++) {
    const node = nodes[i] as Node;
    if (node.depth > MAX_JSON_DEPTH) return { tooDeep: true };
    const turn = pace?.tick();
    if (turn) await turn;
    const entries: Iterable<[Key, unknown]> = Array.isArray(node.value)
      ? node.value.entries()
      : Object.entries(node.value);
    for (const [key, value] of entries) {
      if (typeof key === 'string' && key.includes('\0')) return { nulAt: pathTo(i, key) };
      if (typeof value === 'string') {
        if (value.includes('\0')) return { nulAt: pathTo(i, key) };
      } else if (value && typeof value === 'object') {
        nodes.push({ value, depth: node.depth + 1, parent: i, key });
      }
    }
  }
  return null;
}

function fieldOf(path: Key[]): string {
  return fieldPath(`/${path.map((k) => String(k).replace(/~/g, '~0').replace(/\//g, '~1')).join('/')}`);
}

const NUL = 'must not contain the NUL character (U+0000)';

export function installInputGuard(app: FastifyInstance) {
  app.addHook('onRequest', async (req, reply) => {
    if (req.raw.httpVersion === '1.1' && req.headers.host === undefined) {
      return reply
        .code(400)
        .type('application/json; charset=utf-8')
        .send({ errors: [{ code: 'invalid_request', message: 'An HTTP/1.1 request needs a Host header' }] });
    }
  });
  app.addHook('preValidation', async (req) => {
    const params = (req.params ?? {}) as Record<string, unknown>;
    if (Object.values(params).some((v) => typeof v === 'string' && v.includes('\0'))) {
      throw new AppError('not_found', 'Resource not found');
    }
    const query = await scan(req.query);
    if (query && 'nulAt' in query) {
      const field = String(query.nulAt[0] ?? '');
      throw new AppError('invalid_parameter', `${field} ${NUL}`, { field });
    }
    if (req.body === null || typeof req.body !== 'object') return;
    // A big body was just parsed in one synchronous stretch; scanning it and then Ajv are two
    // more: give the event loop a turn before each.
    const big = Number(req.headers['content-length'] ?? 0) > BIG_BODY_BYTES;
    if (big) await yieldToLoop();
    const body = await scan(req.body, big ? new Pacer() : undefined);
    if (big) await yieldToLoop();
    if (!body) return;
    if ('tooDeep' in body) {
      throw new AppError('invalid_json', `Request body is nested deeper than ${MAX_JSON_DEPTH} levels`);
    }
    const field = fieldOf(body.nulAt);
    throw validationError([{ field, message: `${field} ${NUL}` }]);
  });
}
