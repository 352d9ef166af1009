/**
 * docs/api.md is kept true by comparing it with the OpenAPI document the server serves and with
 * the error table of src/http/error-handler.ts:
 * - every /v1 operation has a section `### METHOD /v1/path`, and every such section exists;
 * - in its section, every request field (JSON and multipart, nested as `recipients[].email`) and
 *   every query parameter has a table row stating its limits, defaults and allowed values;
 * - every field of its answers is named in its chapter; its specific statuses are mentioned;
 * - the error table lists every error code with its status.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { fetchOpenApiDocument } from '../../packages/client/scripts/generate.ts';
import { STATUS_BY_CODE } from '../../src/http/error-handler.ts';
import { codeSpans, mentionsNumber, type Section, sections, tableRows } from './markdown.ts';

type Schema = {
  type?: string;
  properties?: Record<string, Schema>;
  items?: Schema;
  additionalProperties?: Schema | boolean;
  anyOf?: Schema[];
  enum?: unknown[];
  const?: unknown;
  $ref?: string;
  [k: string]: unknown;
};
interface Operation {
  parameters?: { in: string; name: string; schema: Schema }[];
  requestBody?: { content: Record<string, { schema: Schema }> };
  responses: Record<string, { content?: Record<string, { schema: Schema }> }>;
}
interface Doc {
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, Schema> };
}

const ROOT = join(import.meta.dirname, '../..');
const md = readFileSync(join(ROOT, 'docs/api.md'), 'utf8');
const doc = (await fetchOpenApiDocument()) as unknown as Doc;
const all = sections(md);
// 503 and 507 (database unreachable or full) can answer any operation: docs/api.md "Errors" says so once.
const COMMON_STATUSES = new Set(['200', '201', '202', '204', '400', '401', '403', '429', '500', '503', '507']);
const LIMIT_KEYWORDS = [
  'minLength',
  'maxLength',
  'minItems',
  'maxItems',
  'maxProperties',
  'minimum',
  'maximum',
  'default',
];
const PAGE_PARAMS = new Set(['limit', 'cursor']);

const ops = Object.entries(doc.paths).flatMap(([path, byMethod]) =>
  Object.entries(byMethod)
    .filter(() => path.startsWith('/v1/'))
    .map(([method, op]) => ({ name: `${method.toUpperCase()} ${path}`, op })),
);

function section(title: string): Section {
  const s = all.find((x) => x.title === title);
  if (!s) throw new Error(`docs/api.md has no section "${title}"`);
  return s;
}

/** The `##` chapter that contains the `###` section of `title`. */
function chapterOf(title: string): Section {
  const index = all.findIndex((x) => x.title === title);
  const chapter = all
    .slice(0, index)
    .reverse()
    .find((x) => x.level === 2);
  if (!chapter) throw new Error(`no chapter above ${title}`);
  return chapter;
}

function resolve(s: Schema): Schema {
  if (!s.$ref) return s;
  const name = s.$ref.split('/').pop() as string;
  return doc.components.schemas[name] as Schema;
}

/** Every variant of a schema: anyOf branches (null dropped), refs resolved. */
function variants(s: Schema): Schema[] {
  const r = resolve(s);
  return r.anyOf ? r.anyOf.flatMap(variants).filter((v) => v.type !== 'null') : [r];
}

/** Field paths of a request body: `content.subject`, `recipients[].email`, ... */
function fieldPaths(s: Schema, prefix = '', out = new Map<string, Schema>()): Map<string, Schema> {
  for (const v of variants(s)) {
    for (const [name, child] of Object.entries(v.properties ?? {})) {
      const path = prefix ? `${prefix}.${name}` : name;
      out.set(path, child);
      for (const c of variants(child)) {
        if (c.properties) fieldPaths(c, path, out);
        const items = c.items ? variants(c.items) : [];
        for (const it of items) if (it.properties) fieldPaths(it, `${path}[]`, out);
      }
    }
  }
  return out;
}

/** The limits a field's row must state: its own, its items' (arrays of values), its values' (maps). */
function limitsOf(s: Schema): number[] {
  const out: number[] = [];
  const take = (x: Schema) => {
    for (const k of LIMIT_KEYWORDS) if (typeof x[k] === 'number') out.push(x[k] as number);
  };
  for (const v of variants(s)) {
    take(v);
    if (v.items) for (const it of variants(v.items)) if (!it.properties) take(it);
    if (typeof v.additionalProperties === 'object') take(v.additionalProperties);
  }
  return out;
}

function enumsOf(s: Schema): string[] {
  const out: string[] = [];
  for (const v of variants(s)) {
    for (const e of [...(v.enum ?? []), ...(v.const !== undefined ? [v.const] : [])]) out.push(String(e));
    if (v.items) out.push(...enumsOf(v.items));
  }
  return out;
}

/** Every property name of an answer, at any depth. */
function answerNames(s: Schema, out = new Set<string>(), seen = new Set<Schema>()): Set<string> {
  for (const v of variants(s)) {
    if (seen.has(v)) continue;
    seen.add(v);
    for (const [name, child] of Object.entries(v.properties ?? {})) {
      out.add(name);
      answerNames(child, out, seen);
    }
    if (v.items) answerNames(v.items, out, seen);
    if (typeof v.additionalProperties === 'object') answerNames(v.additionalProperties, out, seen);
  }
  return out;
}

/** Table rows of `text` keyed by each `name` in their first cell. */
function rowsByName(text: string): Map<string, string> {
  const map = new Map<string, string>();
  for (const cells of tableRows(text)) {
    const first = cells[0] ?? '';
    for (const name of codeSpans(first)) map.set(name, cells.join(' | '));
  }
  return map;
}

describe('docs/api.md covers the OpenAPI document', () => {
  const headings = all.filter((s) => /^(GET|POST|PUT|PATCH|DELETE) \/v1\//.test(s.title)).map((s) => s.title);

  it('documents every operation, and only operations that exist', () => {
    const names = ops.map((o) => o.name);
    expect(names.length).toBeGreaterThan(20);
    expect(
      names.filter((n) => !headings.includes(n)),
      'undocumented',
    ).toEqual([]);
    expect(
      headings.filter((h) => !names.includes(h)),
      'documented but not served',
    ).toEqual([]);
    expect(new Set(headings).size, 'an operation documented twice').toBe(headings.length);
  });

  for (const { name, op } of ops) {
    describe(name, () => {
      it('has a row for every request field and query parameter, with its limits and values', () => {
        const s = section(name);
        const rows = rowsByName(s.body);
        const pageRows = rowsByName(section('Pagination').body);
        const problems: string[] = [];
        const check = (field: string, schema: Schema, where: Map<string, string>) => {
          const row = where.get(field);
          if (!row) return problems.push(`no row for \`${field}\``);
          for (const n of limitsOf(schema)) if (!mentionsNumber(row, n)) problems.push(`\`${field}\` row lacks ${n}`);
          for (const e of enumsOf(schema)) if (!s.body.includes(`\`${e}\``)) problems.push(`\`${field}\` value ${e}`);
        };
        for (const [type, { schema }] of Object.entries(op.requestBody?.content ?? {})) {
          expect(['application/json', 'multipart/form-data']).toContain(type);
          for (const [path, child] of fieldPaths(schema)) check(path, child, rows);
        }
        for (const p of op.parameters ?? []) {
          if (p.in !== 'query') continue;
          // limit and cursor are documented once, under Pagination; list sections point there.
          check(p.name, p.schema, PAGE_PARAMS.has(p.name) ? pageRows : rows);
        }
        expect(problems).toEqual([]);
      });

      it('names every field of its answers, its specific statuses and Idempotency-Key support', () => {
        const s = section(name);
        const text = `${chapterOf(name).body}\n${section('Pagination').body}`;
        const spans = new Set(codeSpans(text));
        const missing: string[] = [];
        for (const [status, res] of Object.entries(op.responses)) {
          if (!COMMON_STATUSES.has(status) && !s.body.includes(status)) missing.push(`status ${status}`);
          if (!status.startsWith('2')) continue;
          for (const media of Object.values(res.content ?? {})) {
            for (const n of answerNames(media.schema)) if (!spans.has(n)) missing.push(`answer field \`${n}\``);
          }
        }
        const keyed = op.parameters?.some((p) => p.in === 'header' && p.name === 'idempotency-key');
        if (keyed && !s.body.includes('Idempotency-Key')) missing.push('Idempotency-Key');
        expect(missing).toEqual([]);
      });
    });
  }
});

describe('docs/api.md documents every error code', () => {
  const table = new Map<string, string>();
  for (const cells of tableRows(section('Errors').body)) {
    const [code] = codeSpans(cells[0] ?? '');
    if (code && cells[1] !== undefined) table.set(code, cells[1]);
  }

  it('lists each code of STATUS_BY_CODE with its status', () => {
    for (const [code, status] of Object.entries(STATUS_BY_CODE)) {
      expect(table.get(code), `error code ${code}`).toBe(String(status));
    }
  });

  it('lists no code the server cannot answer', () => {
    const handler = readFileSync(join(ROOT, 'src/http/error-handler.ts'), 'utf8');
    const emitted = new Set([
      ...Object.keys(STATUS_BY_CODE),
      ...[...handler.matchAll(/code: '([a-z_]+)'/g)].map((m) => m[1]),
    ]);
    expect([...table.keys()].filter((c) => !emitted.has(c))).toEqual([]);
  });
});

describe('the README links the API documentation', () => {
  it('links docs/api.md and docs/quickstart.md', () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    expect(readme).toContain('(docs/api.md)');
    expect(readme).toContain('(docs/quickstart.md)');
  });
});
