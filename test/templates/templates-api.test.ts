/**
 * Stored templates over the API (docs/api.md "Templates", docs/templates.md): create, list,
 * get, versions on every save, publish, preview with the template language, 422s naming the
 * part and line, tenant isolation, scope and Idempotency-Key.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  call,
  createTenant,
  createTestContext,
  keyWithScopes,
  type TestContext,
  type TestTenant,
} from '../helpers/context.ts';
import { expectError } from '../helpers/security-suite.ts';
import { checkLimitParameter, checkTamperedCursor, walkPages } from '../foundation/paging.ts';

let ctx: TestContext;
let a: TestTenant;
let b: TestTenant;

beforeAll(async () => {
  ctx = await createTestContext();
  a = await createTenant(ctx);
  b = await createTenant(ctx);
});
afterAll(async () => {
  await ctx?.close();
});

interface Version {
  version: number;
  subject: string;
  text: string | null;
  html: string | null;
  from: string | null;
  reply_to: string | null;
  headers: Record<string, string>;
  defaults: Record<string, unknown>;
}
interface Tpl {
  id: string;
  name: string;
  description: string | null;
  published: Version | null;
  draft: Version | null;
}

let seq = 0;
async function create(t: TestTenant, body: Record<string, unknown> = {}): Promise<Tpl> {
  const res = await call(ctx.app, 'POST', '/v1/templates', {
    key: t.apiKey,
    body: { name: `tpl-${++seq}`, subject: 'Hello {{name}}', text: 'Hi {{name}}', ...body },
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json() as Tpl;
}

function fieldsOf(res: { json(): unknown }): { field?: string; message: string }[] {
  return (res.json() as { errors: { field?: string; message: string }[] }).errors;
}

describe('create, get, list, delete', () => {
  it('creates version 1 as the draft, nothing published', async () => {
    const res = await call(ctx.app, 'POST', '/v1/templates', {
      key: a.apiKey,
      body: {
        name: 'welcome',
        description: 'First mail',
        subject: 'Welcome {{user.first}}',
        html: '<p>Hi {{user.first}}</p>',
        from: 'Team <team@example.com>',
        reply_to: 'help@example.com',
        headers: { 'X-Campaign': 'welcome-{{plan}}' },
        defaults: { plan: 'free' },
      },
    });
    expect(res.statusCode, res.body).toBe(201);
    const t = res.json() as Tpl & { created_at: string; updated_at: string };
    expect(t).toMatchObject({ name: 'welcome', description: 'First mail', published: null });
    expect(t.draft).toMatchObject({
      version: 1,
      subject: 'Welcome {{user.first}}',
      text: null,
      html: '<p>Hi {{user.first}}</p>',
      from: 'Team <team@example.com>',
      reply_to: 'help@example.com',
      headers: { 'X-Campaign': 'welcome-{{plan}}' },
      defaults: { plan: 'free' },
    });
    const got = await call(ctx.app, 'GET', `/v1/templates/${t.id}`, { key: a.apiKey });
    expect(got.statusCode).toBe(200);
    expect(got.json()).toEqual(t);
  });

  it('refuses a second template of the same name in the tenant (another tenant may use it)', async () => {
    await create(a, { name: 'dup' });
    const res = await call(ctx.app, 'POST', '/v1/templates', {
      key: a.apiKey,
      body: { name: 'dup', subject: 's', text: 't' },
    });
    expect(expectError(res, 422, 'validation_failed').errors[0]).toMatchObject({ field: 'name' });
    await create(b, { name: 'dup' });
  });

  it('honours Idempotency-Key: the retry answers the same template, and only one exists', async () => {
    const body = { name: 'idem', subject: 's', text: 't' };
    const headers = { 'idempotency-key': 'tpl-create-1' };
    const first = await call(ctx.app, 'POST', '/v1/templates', { key: a.apiKey, body, headers });
    const again = await call(ctx.app, 'POST', '/v1/templates', { key: a.apiKey, body, headers });
    expect(first.statusCode).toBe(201);
    expect(again.statusCode).toBe(201);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect((again.json() as Tpl).id).toBe((first.json() as Tpl).id);
    const other = await call(ctx.app, 'POST', '/v1/templates', {
      key: a.apiKey,
      body: { ...body, name: 'idem2' },
      headers,
    });
    expectError(other, 409, 'idempotency_key_reused');
  });

  it('lists the tenant’s templates by cursor, newest first, without other tenants’ ones', async () => {
    const other = await create(b);
    for (let i = 0; i < 5; i++) await create(a);
    const { ids } = await walkPages(ctx, '/v1/templates', a.apiKey, 2);
    expect(ids.length).toBeGreaterThanOrEqual(5);
    expect(ids).not.toContain(other.id);
    expect([...ids].sort().reverse()).toEqual(ids);
    await checkLimitParameter(ctx, '/v1/templates', a.apiKey);
    const page = (await call(ctx.app, 'GET', '/v1/templates', { key: a.apiKey, query: { limit: '1' } })).json() as {
      next_cursor: string;
    };
    await checkTamperedCursor(ctx, '/v1/templates', a.apiKey, page.next_cursor);
  });

  it('deletes with 204; then the template is 404', async () => {
    const t = await create(a);
    const del = await call(ctx.app, 'DELETE', `/v1/templates/${t.id}`, { key: a.apiKey });
    expect(del.statusCode).toBe(204);
    expectError(await call(ctx.app, 'GET', `/v1/templates/${t.id}`, { key: a.apiKey }), 404, 'not_found');
    expectError(await call(ctx.app, 'DELETE', `/v1/templates/${t.id}`, { key: a.apiKey }), 404, 'not_found');
  });

  it('answers 404 for another tenant’s template on every route, and changes nothing', async () => {
    const t = await create(a);
    for (const [method, suffix, body] of [
      ['GET', '', undefined],
      ['PATCH', '', { subject: 'stolen' }],
      ['DELETE', '', undefined],
      ['POST', '/publish', undefined],
      ['GET', '/versions', undefined],
      ['POST', '/preview', { draft: true }],
    ] as const) {
      const res = await call(ctx.app, method, `/v1/templates/${t.id}${suffix}`, {
        key: b.apiKey,
        ...(body ? { body } : {}),
      });
      expectError(res, 404, 'not_found');
    }
    const mine = (await call(ctx.app, 'GET', `/v1/templates/${t.id}`, { key: a.apiKey })).json() as Tpl;
    expect(mine.draft?.version).toBe(1);
    expect(mine.published).toBeNull();
  });

  it('needs manage:templates (403 for a key with other scopes)', async () => {
    const key = await keyWithScopes(ctx, a.tenantId, ['send:transmissions']);
    expectError(await call(ctx.app, 'GET', '/v1/templates', { key }), 403, 'insufficient_scope');
  });
});

describe('versions and publishing', () => {
  it('saves each PATCH as a new draft version, carrying over fields not sent', async () => {
    const t = await create(a, { html: '<b>{{name}}</b>', defaults: { name: 'friend' } });
    const p1 = await call(ctx.app, 'PATCH', `/v1/templates/${t.id}`, { key: a.apiKey, body: { subject: 'Second' } });
    expect(p1.statusCode, p1.body).toBe(200);
    const v2 = (p1.json() as Tpl).draft;
    expect(v2).toMatchObject({
      version: 2,
      subject: 'Second',
      text: 'Hi {{name}}',
      html: '<b>{{name}}</b>',
      defaults: { name: 'friend' },
    });
    const p2 = await call(ctx.app, 'PATCH', `/v1/templates/${t.id}`, { key: a.apiKey, body: { text: null } });
    expect((p2.json() as Tpl).draft).toMatchObject({
      version: 3,
      subject: 'Second',
      text: null,
      html: '<b>{{name}}</b>',
    });
    const cleared = await call(ctx.app, 'PATCH', `/v1/templates/${t.id}`, { key: a.apiKey, body: { html: null } });
    expect(expectError(cleared, 422, 'validation_failed').errors[0]).toMatchObject({ field: 'text' });
  });

  it('publishes the draft; the draft shows that version until the next PATCH', async () => {
    const t = await create(a);
    await call(ctx.app, 'PATCH', `/v1/templates/${t.id}`, { key: a.apiKey, body: { subject: 'v2' } });
    const pub = await call(ctx.app, 'POST', `/v1/templates/${t.id}/publish`, { key: a.apiKey });
    expect(pub.statusCode, pub.body).toBe(200);
    const after = pub.json() as Tpl;
    expect(after.published?.version).toBe(2);
    expect(after.draft?.version).toBe(2);
    const next = (
      await call(ctx.app, 'PATCH', `/v1/templates/${t.id}`, { key: a.apiKey, body: { subject: 'v3' } })
    ).json() as Tpl;
    expect(next.draft).toMatchObject({ version: 3, subject: 'v3' });
    expect(next.published).toMatchObject({ version: 2, subject: 'v2' });
  });

  it('lists versions newest first, by cursor', async () => {
    const t = await create(a);
    for (let i = 2; i <= 5; i++)
      await call(ctx.app, 'PATCH', `/v1/templates/${t.id}`, { key: a.apiKey, body: { subject: `v${i}` } });
    const url = `/v1/templates/${t.id}/versions`;
    const seen: number[] = [];
    let cursor: string | null = null;
    do {
      const res = await call(ctx.app, 'GET', url, {
        key: a.apiKey,
        query: { limit: '2', ...(cursor ? { cursor } : {}) },
      });
      expect(res.statusCode, res.body).toBe(200);
      const page = res.json() as { data: Version[]; next_cursor: string | null };
      seen.push(...page.data.map((v) => v.version));
      cursor = page.next_cursor;
    } while (cursor);
    expect(seen).toEqual([5, 4, 3, 2, 1]);
  });

  it('gives each of several concurrent PATCHes its own version number', async () => {
    const t = await create(a);
    const results = await Promise.all(
      [1, 2, 3, 4].map((i) =>
        call(ctx.app, 'PATCH', `/v1/templates/${t.id}`, { key: a.apiKey, body: { subject: `c${i}` } }),
      ),
    );
    expect(results.map((r) => r.statusCode)).toEqual([200, 200, 200, 200]);
    const versions = results.map((r) => (r.json() as Tpl).draft?.version).sort();
    expect(versions).toEqual([2, 3, 4, 5]);
  });
});

describe('the language, through preview', () => {
  async function preview(t: Tpl, body: Record<string, unknown>) {
    return call(ctx.app, 'POST', `/v1/templates/${t.id}/preview`, { key: a.apiKey, body });
  }

  it('escapes {{x}} in html, not in text or subject; {{{x}}} is raw; nested paths, if/else, unless, each', async () => {
    const t = await create(a, {
      subject: 'For {{user.name}}',
      text: '{{user.name}}{{#if vip}} (VIP){{else}} (regular){{/if}}{{#unless paid}} unpaid{{/unless}}\n{{#each items}}- {{this.title}}\n{{/each}}',
      html: '<p>{{user.name}} / {{{user.name}}}</p><ul>{{#each items}}<li>{{@index}}:{{title}}</li>{{/each}}</ul>',
    });
    const res = await preview(t, {
      draft: true,
      substitution_data: { user: { name: 'Tom & <Jerry>' }, vip: true, items: [{ title: 'a<b' }, { title: 'c' }] },
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({
      subject: 'For Tom & <Jerry>',
      text: 'Tom & <Jerry> (VIP) unpaid\n- a<b\n- c\n',
      html: '<p>Tom &amp; &lt;Jerry&gt; / Tom & <Jerry></p><ul><li>0:a&lt;b</li><li>1:c</li></ul>',
    });
  });

  it('renders missing values empty and uses defaults under the sample data', async () => {
    const t = await create(a, {
      text: '[{{missing}}][{{a.b.c}}][{{plan}}][{{name}}]',
      defaults: { plan: 'free', name: 'x' },
    });
    const res = await preview(t, { draft: true, substitution_data: { name: 'Ann' } });
    expect(res.json()).toMatchObject({ text: '[][][free][Ann]' });
  });

  it('renders prototype properties empty: {{constructor.constructor}}, {{__proto__}}, {{toString}}', async () => {
    const t = await create(a, {
      subject: 'x{{constructor.constructor}}x',
      text: '[{{__proto__}}][{{constructor.name}}][{{toString}}][{{name.constructor}}][{{name.__proto__}}][{{#each name}}{{this}}{{/each}}]',
    });
    const res = await preview(t, { draft: true, substitution_data: { name: 'Ann' } });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ subject: 'xx', text: '[][][][][][]' });
  });

  it('generates the text part of an HTML-only template; a text part of its own wins', async () => {
    const t = await create(a, {
      text: undefined,
      html: '<h1>Hi {{name}}</h1><p>See <a href="https://example.com/x">this</a></p>',
    });
    const res = await preview(t, { draft: true, substitution_data: { name: 'Ann' } });
    const out = res.json() as { text: string; html: string };
    expect(out.text).toContain('HI ANN');
    expect(out.text).toContain('this [https://example.com/x]');
    const own = await create(a, { text: 'mine', html: '<p>theirs</p>' });
    expect(((await preview(own, { draft: true })).json() as { text: string }).text).toBe('mine');
  });

  it('previews the published version by default, the draft with draft:true', async () => {
    const t = await create(a, { subject: 'one' });
    await call(ctx.app, 'POST', `/v1/templates/${t.id}/publish`, { key: a.apiKey });
    await call(ctx.app, 'PATCH', `/v1/templates/${t.id}`, { key: a.apiKey, body: { subject: 'two' } });
    expect(((await preview(t, {})).json() as { subject: string }).subject).toBe('one');
    expect(((await preview(t, { draft: true })).json() as { subject: string }).subject).toBe('two');
    const unpublished = await create(a, { subject: 'draft only' });
    expect(((await preview(unpublished, {})).json() as { subject: string }).subject).toBe('draft only');
    expect(expectError(await preview(unpublished, { draft: false }), 422, 'validation_failed').errors[0]).toMatchObject(
      {
        field: 'draft',
      },
    );
  });

  it('fails a preview whose data puts CR or LF into the subject (422 naming subject)', async () => {
    const t = await create(a, { subject: 'Hi {{name}}' });
    const res = await preview(t, { draft: true, substitution_data: { name: 'x\r\nBcc: victim@example.org' } });
    expect(expectError(res, 422, 'validation_failed').errors[0]).toMatchObject({ field: 'subject' });
  });
});

describe('422 at save', () => {
  it('names the part and the line of a syntax error (create and PATCH)', async () => {
    const res = await call(ctx.app, 'POST', '/v1/templates', {
      key: a.apiKey,
      body: { name: 'broken', subject: 'ok {{name}}', html: '<p>\n{{#if x}}\nno end', text: 'fine' },
    });
    const errs = fieldsOf(res);
    expect(res.statusCode).toBe(422);
    expect(errs).toHaveLength(1);
    expect(errs[0]?.field).toBe('html');
    expect(errs[0]?.message).toMatch(/^html: line 3: /);
    const t = await create(a);
    const patch = await call(ctx.app, 'PATCH', `/v1/templates/${t.id}`, {
      key: a.apiKey,
      body: { subject: 'a {{#each}}', text: 'line1\nline2 {{a}' },
    });
    expect(patch.statusCode).toBe(422);
    expect(
      fieldsOf(patch)
        .map((e) => e.field)
        .sort(),
    ).toEqual(['subject', 'text']);
    expect(fieldsOf(patch).find((e) => e.field === 'text')?.message).toMatch(/^text: line 2: /);
    const still = (await call(ctx.app, 'GET', `/v1/templates/${t.id}`, { key: a.apiKey })).json() as Tpl;
    expect(still.draft?.version).toBe(1);
  });

  it('refuses helpers that reach outside the data, partials and decorators, with their line', async () => {
    for (const [source, line, what] of [
      ['{{lookup this "constructor"}}', 1, /unknown helper lookup/],
      ['a\n{{log "x"}}', 2, /unknown helper log/],
      ['a\nb\n{{> header}}', 3, /partials/],
      ['{{#> layout}}x{{/layout}}', 1, /partials/],
      ['{{*inline "p"}}', 1, /decorators/],
      ['{{foo bar}}', 1, /unknown helper foo/],
    ] as const) {
      const res = await call(ctx.app, 'POST', '/v1/templates', {
        key: a.apiKey,
        body: { name: `bad-${++seq}`, subject: 's', text: source },
      });
      expect(res.statusCode, source).toBe(422);
      const e = fieldsOf(res)[0];
      expect(e?.field).toBe('text');
      expect(e?.message, source).toMatch(new RegExp(`^text: line ${line}: `));
      expect(e?.message, source).toMatch(what);
    }
  });

  it('checks from, reply_to and headers with the rules transmissions use', async () => {
    const res = await call(ctx.app, 'POST', '/v1/templates', {
      key: a.apiKey,
      body: {
        name: 'bad-identity',
        subject: 'Hi\r\nBcc: x@example.org',
        text: 't',
        from: 'a@example.com, b@example.com',
        reply_to: '{{who}}@example.com',
        headers: { 'Content-Type': 'text/html', 'X-Ok': 'v\nx' },
      },
    });
    expect(res.statusCode).toBe(422);
    expect(
      fieldsOf(res)
        .map((e) => e.field)
        .sort(),
    ).toEqual(['from', 'headers.Content-Type', 'headers.X-Ok', 'reply_to', 'subject']);
    // The display name may use the language.
    const ok = await create(a, { from: '{{sender_name}} <news@example.com>' });
    expect(ok.draft?.from).toBe('"{{sender_name}}" <news@example.com>');
  });
});
