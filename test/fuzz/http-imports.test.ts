/**
 * Property: the multipart CSV imports (POST /v1/suppressions with multipart/form-data, and the
 * dashboard's /dashboard/api/suppressions/import) take any CSV (odd headers, quoting, line
 * endings, NUL, binary, wrong column counts) in any multipart envelope (wrong field name, two
 * files, no final boundary, a boundary that does not match) without a 5xx, always with the
 * documented error body, and count what they imported and skipped consistently.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type DashUser, signedInUser } from '../dashboard/helpers.ts';
import { nastyString } from './arbitraries.ts';
import { type ApiFuzz, FUZZ_TIMEOUT_MS, fuzzParams, send, setupApiFuzz } from './harness.ts';

let f: ApiFuzz;
let user: DashUser;
beforeAll(async () => {
  f = await setupApiFuzz();
  user = await signedInUser(f.ctx);
}, 120_000);
afterAll(async () => {
  await f?.close();
});

const field = fc.oneof(
  {
    arbitrary: fc.constantFrom('ann@example.com', 'Example.COM', 'email', 'domain', 'manual', 'hard_bounce', ''),
    weight: 3,
  },
  { arbitrary: nastyString, weight: 2 },
  { arbitrary: fc.string({ unit: 'binary-ascii', maxLength: 12 }), weight: 1 },
);
const cell = fc
  .tuple(field, fc.constantFrom('plain', 'quoted', 'broken'))
  .map(([v, q]) => (q === 'quoted' ? `"${v.replace(/"/g, '""')}"` : q === 'broken' ? `"${v}` : v));
const header = fc.constantFrom(
  'identifier',
  'identifier,type,reason_category,description',
  'IDENTIFIER,Type',
  'type,identifier',
  'identifier,identifier',
  '\ufeffidentifier,description',
  'x,y',
  '',
);

/** A row in the documented column order: a plausible identifier, the rest anything. */
const fullRow = fc
  .tuple(
    fc.constantFrom('ann@example.com', 'bob@example.org', 'example.net'),
    fc.constantFrom('email', 'domain', ''),
    fc.constantFrom('manual', 'hard_bounce', 'bogus', ''),
    fc.oneof(nastyString, fc.constant('note')),
  )
  .map((cells) => cells.map((c) => (/[",\r\n]/.test(c) ? `"${c.replace(/"/g, '""')}"` : c)));

/** CSV text: a header row, then rows of 0-5 cells, with any line ending. */
const csv = fc.oneof(
  fc
    .tuple(header, fc.array(fc.array(cell, { maxLength: 5 }), { maxLength: 12 }), fc.constantFrom('\n', '\r\n', '\r'))
    .map(([h, rows, eol]) => [h, ...rows.map((r) => r.join(','))].join(eol)),
  fc
    .tuple(fc.array(fullRow, { minLength: 1, maxLength: 8 }), fc.constantFrom('\n', '\r\n'))
    .map(([rows, eol]) => ['identifier,type,reason_category,description', ...rows.map((r) => r.join(','))].join(eol)),
);

const B = 'fuzzboundary';
function part(name: string, filename: string | null, content: Buffer): Buffer {
  const disposition = `form-data; name="${name}"${filename === null ? '' : `; filename="${filename}"`}`;
  return Buffer.concat([
    Buffer.from(`--${B}\r\nContent-Disposition: ${disposition}\r\nContent-Type: text/csv\r\n\r\n`),
    content,
    Buffer.from('\r\n'),
  ]);
}

type Envelope = 'ok' | 'fieldName' | 'twoFiles' | 'noFilename' | 'truncated' | 'textFirst' | 'otherBoundary' | 'empty';
const envelope = fc.oneof(
  { arbitrary: fc.constant<Envelope>('ok'), weight: 6 },
  {
    arbitrary: fc.constantFrom<Envelope>(
      'fieldName',
      'twoFiles',
      'noFilename',
      'truncated',
      'textFirst',
      'otherBoundary',
      'empty',
    ),
    weight: 3,
  },
);

function multipart(content: Buffer, kind: Envelope): { payload: Buffer; type: string } {
  const end = Buffer.from(`--${B}--\r\n`);
  const type = `multipart/form-data; boundary=${kind === 'otherBoundary' ? 'not-the-one' : B}`;
  switch (kind) {
    case 'fieldName':
      return { payload: Buffer.concat([part('upload', 's.csv', content), end]), type };
    case 'twoFiles':
      return { payload: Buffer.concat([part('file', 'a.csv', content), part('file', 'b.csv', content), end]), type };
    case 'noFilename':
      return { payload: Buffer.concat([part('file', null, content), end]), type };
    case 'truncated':
      return { payload: part('file', 's.csv', content).subarray(0, -3), type };
    case 'textFirst':
      return {
        payload: Buffer.concat([part('note', null, Buffer.from('hi')), part('file', 's.csv', content), end]),
        type,
      };
    case 'empty':
      return { payload: Buffer.alloc(0), type };
    default:
      return { payload: Buffer.concat([part('file', 's.csv', content), end]), type };
  }
}

const content = fc.oneof(
  { arbitrary: csv.map((s) => Buffer.from(s, 'utf8')), weight: 5 },
  { arbitrary: fc.uint8Array({ maxLength: 200 }).map((b) => Buffer.from(b)), weight: 1 },
);

interface ImportAnswer {
  imported: number;
  skipped: number;
  errors: { line: number; message: string }[];
}

describe('CSV imports: any file in any envelope', () => {
  for (const target of ['/v1/suppressions', '/dashboard/api/suppressions/import']) {
    it(
      `POST ${target}: never a 5xx, always the documented error, consistent counts`,
      async () => {
        const dashboard = target.startsWith('/dashboard');
        await fc.assert(
          fc.asyncProperty(content, envelope, async (file, kind) => {
            const { payload, type } = multipart(file, kind);
            const headers: Record<string, string> = { 'content-type': type };
            if (dashboard) {
              headers.cookie = user.client.cookieHeader();
              headers['x-csrf-token'] = user.client.csrf;
            } else headers.authorization = `Bearer ${f.tenant.apiKey}`;
            const res = await send(
              f.ctx,
              {
                method: 'POST',
                url: target,
                headers,
                payload,
                ...(dashboard ? { remoteAddress: user.client.ip } : {}),
              },
              { dashboard },
            );
            if (res.statusCode !== 200) return;
            const body = res.json() as ImportAnswer;
            expect(Number.isInteger(body.imported) && Number.isInteger(body.skipped)).toBe(true);
            expect(body.errors.length).toBeLessThanOrEqual(Math.min(body.skipped, 100));
          }),
          fuzzParams(60),
        );
      },
      FUZZ_TIMEOUT_MS,
    );
  }
});
