/**
 * The client cannot drift from the API: its generated types match what the server serves today,
 * and its endpoint table covers every /v1 operation of the OpenAPI document, both ways.
 */
import { readFileSync } from 'node:fs';
import { ENDPOINTS, HELPERS, KEYED_POSTS, Postyard, UNKEYED_POSTS } from '@postyard/client';
import { describe, expect, it } from 'vitest';
import { fetchOpenApiDocument, GENERATED_FILE, renderTypes } from '../../packages/client/scripts/generate.ts';

interface Operation {
  parameters?: { in: string; name: string }[];
}
type Doc = { paths: Record<string, Record<string, Operation>> };

const doc = (await fetchOpenApiDocument()) as unknown as Doc;
const operations = Object.entries(doc.paths).flatMap(([path, ops]) =>
  Object.entries(ops).map(([method, op]) => ({ key: `${method.toUpperCase()} ${path}`, op })),
);

describe('generated types', () => {
  it('packages/client/src/generated/openapi.ts is what `npm run client:generate` makes today', async () => {
    const fresh = await renderTypes(doc as unknown as Record<string, unknown>);
    const committed = readFileSync(GENERATED_FILE, 'utf8');
    // On failure: run `npm run client:generate` and commit the result (then fix what no longer compiles).
    expect(committed === fresh, 'the generated client types are stale: run npm run client:generate').toBe(true);
  });
});

describe('endpoint coverage', () => {
  it('every /v1 operation has a client method, and every client endpoint exists', () => {
    const documented = operations.map((o) => o.key).filter((k) => k.includes(' /v1/'));
    const client = Object.values(ENDPOINTS).map(([m, p]) => `${m} ${p}`);
    expect(new Set(client).size).toBe(client.length);
    expect([...client].sort()).toEqual([...documented].sort());
  });

  it('the client sends Idempotency-Key exactly where the server honours it', () => {
    const honouring = operations
      .filter((o) => o.op.parameters?.some((p) => p.in === 'header' && p.name.toLowerCase() === 'idempotency-key'))
      .map((o) => o.key)
      .sort();
    const keyed = [...KEYED_POSTS].map((n) => ENDPOINTS[n].join(' ')).sort();
    expect(keyed).toEqual(honouring);
  });

  it('every other POST has a recorded retry decision', () => {
    const posts = Object.entries(ENDPOINTS)
      .filter(([name, [m]]) => m === 'POST' && !KEYED_POSTS.has(name as keyof typeof ENDPOINTS))
      .map(([name]) => name)
      .sort();
    expect(posts).toEqual(Object.keys(UNKEYED_POSTS).sort());
  });

  it('every endpoint and helper name is a method of the client', () => {
    const client = new Postyard({ apiKey: 'pyk_x', baseUrl: 'http://127.0.0.1:1' }) as unknown as Record<
      string,
      Record<string, unknown>
    >;
    for (const name of [...Object.keys(ENDPOINTS), ...Object.keys(HELPERS)]) {
      const [resource, method] = name.split('.') as [string, string];
      expect(typeof client[resource]?.[method], name).toBe('function');
    }
  });
});
