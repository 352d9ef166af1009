/**
 * Issue 13 item 1: the visible From (and Reply-To, and an SMTP Sender) is the address that was
 * checked. Outside development mode only the tenant's verified domains may send, so this suite
 * runs with POSTYARD_DEV_MODE=false and real verified domains (DNS peer on loopback).
 */
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { simpleParser } from 'mailparser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkMailbox, formatMailbox } from '../../src/lib/email.ts';
import { forDelivery, renderMessage } from '../../src/modules/delivery/render/renderer.ts';
import { addDomain, BOUNCE_HOST, publish, verifyDomain } from '../domains/helpers.ts';
import { call, createTenant, type TestTenant } from '../helpers/context.ts';
import { type DnsServer, startDnsServer } from '../peers/dns-server.ts';
import { message, queuedId, RawClient, type SmtpSetup, sendRaw, setupSmtp } from '../smtp/helpers.ts';

const CERTS = fileURLToPath(new URL('../peers/certs/', import.meta.url));

/** The three From values issue 13 found accepted with 202, each hiding a foreign address. */
const SPOOFS = [
  'Boss <ceo@other-tenant.test> <me@my-verified.test>',
  'Boss <ceo@other-tenant.test>, <me@my-verified.test>',
  'ceo@bank.test, Foo <me@my-verified.test>',
];

let dns: DnsServer;
let s: SmtpSetup;
let other: TestTenant;

beforeAll(async () => {
  dns = await startDnsServer();
  s = await setupSmtp({
    POSTYARD_DEV_MODE: 'false',
    POSTYARD_SMTP_TLS_CERT: join(CERTS, 'sink-cert.pem'),
    POSTYARD_SMTP_TLS_KEY: join(CERTS, 'sink-key.pem'),
    POSTYARD_DNS_SERVERS: dns.address,
    POSTYARD_BOUNCE_HOST: BOUNCE_HOST,
  });
  other = await createTenant(s.ctx, 'Other <noreply@other-tenant.test>');
  for (const [key, domain] of [
    [s.tenant.apiKey, 'my-verified.test'],
    [other.apiKey, 'other-tenant.test'],
  ] as const) {
    const d = await addDomain(s.ctx, key, domain);
    publish(dns, d);
    expect((await verifyDomain(s.ctx, key, d.id)).status).toBe('verified');
  }
});
afterAll(async () => {
  await s?.close();
  await dns?.close();
});

function send(content: Record<string, unknown>, key = s.tenant.apiKey) {
  return call(s.ctx.app, 'POST', '/v1/transmissions', {
    key,
    body: { recipients: [{ email: 'ann@example.net' }], content: { subject: 'Hi', text: 'Hello', ...content } },
  });
}

function expectInvalid(res: Awaited<ReturnType<typeof send>>, field: string) {
  expect(res.statusCode, res.body).toBe(422);
  expect(res.json().errors).toEqual([expect.objectContaining({ code: 'validation_failed', field })]);
}

/** Renders the stored transmission's first message exactly as the delivery worker would. */
async function renderStored(transmissionId: string) {
  const db = s.ctx.c.database.db;
  const tx = await db
    .selectFrom('transmissions')
    .selectAll()
    .where('id', '=', transmissionId)
    .executeTakeFirstOrThrow();
  const msg = await db
    .selectFrom('messages')
    .selectAll()
    .where('transmission_id', '=', transmissionId)
    .executeTakeFirstOrThrow();
  return renderMessage(msg, forDelivery(tx), null, 'verp-token', 'bounce.example.net');
}

describe('HTTP API: content.from and content.reply_to are one checked mailbox', () => {
  it('refuses the three From values of issue 13 with 422 validation_failed on content.from', async () => {
    for (const from of SPOOFS) expectInvalid(await send({ from }), 'content.from');
    // Nothing was stored for any of them.
    const rows = await s.ctx.c.database.db
      .selectFrom('transmissions')
      .select('id')
      .where('tenant_id', '=', s.tenant.tenantId)
      .execute();
    expect(rows).toHaveLength(0);
  });

  it('refuses Resent-From and Resent-Sender in content.headers with 422 (identities come only from checked values)', async () => {
    for (const name of ['Resent-From', 'resent-sender']) {
      const res = await send({ from: 'me@my-verified.test', headers: { [name]: 'Boss <ceo@bank.test>' } });
      expectInvalid(res, `content.headers.${name}`);
    }
  });

  it('refuses the same values as content.reply_to with 422 on content.reply_to', async () => {
    for (const reply_to of SPOOFS)
      expectInvalid(await send({ from: 'me@my-verified.test', reply_to }), 'content.reply_to');
  });

  it('refuses a display name holding another address, allows one holding its own', async () => {
    for (const from of [
      '"ceo@bank.test" <me@my-verified.test>',
      'me@my-verified.test (ceo@bank.test)',
      '=?utf-8?B?Y2VvQGJhbmsudGVzdA==?= <me@my-verified.test>', // encoded word for ceo@bank.test
    ]) {
      expectInvalid(await send({ from }), 'content.from');
    }
    const ok = await send({ from: '"Me@My-Verified.test" <me@my-verified.test>' });
    expect(ok.statusCode, ok.body).toBe(202);
  });

  it('the From and Reply-To headers sent are built from the checked name and address', async () => {
    const res = await send({
      from: '"Boss, Inc. \\"HQ\\"" <Me@MY-VERIFIED.test>',
      reply_to: 'Jürgen <help@my-verified.test>',
    });
    expect(res.statusCode, res.body).toBe(202);
    const rendered = await renderStored(res.json().transmission_id);
    const parsed = await simpleParser(rendered.raw);
    expect(parsed.from?.value).toEqual([{ name: 'Boss, Inc. "HQ"', address: 'Me@my-verified.test' }]);
    expect(parsed.replyTo?.value).toEqual([{ name: 'Jürgen', address: 'help@my-verified.test' }]);
    expect(parsed.headers.get('message-id')).toMatch(/@my-verified\.test>$/);
  });

  it('a stored From that is not one mailbox (accepted before this check) is never rendered', async () => {
    const res = await send({ from: 'me@my-verified.test' });
    expect(res.statusCode, res.body).toBe(202);
    const id = res.json().transmission_id as string;
    const db = s.ctx.c.database.db;
    const row = await db.selectFrom('transmissions').select('content').where('id', '=', id).executeTakeFirstOrThrow();
    const content = { ...JSON.parse(row.content), from: SPOOFS[1] };
    await db
      .updateTable('transmissions')
      .set({ content: JSON.stringify(content) })
      .where('id', '=', id)
      .execute();
    await expect(renderStored(id)).rejects.toThrow(/\bfrom\b.*not exactly one acceptable mailbox/i);
  });

  it('the stored form reads back as the same mailbox', () => {
    for (const name of ['Shop', "O'Brien", 'Boss, Inc. "HQ"', 'a\\b', 'Jürgen', '(x) <y> ;z:', 'Me@My-Verified.test']) {
      const m = { name, email: 'me@my-verified.test' };
      expect(checkMailbox(formatMailbox(m)), name).toEqual({ mailbox: m });
    }
  });

  it('the tenant default sender is held to the same rule', async () => {
    for (const from of SPOOFS) {
      await expect(s.ctx.c.tenants.create({ name: 'Spoofer', from })).rejects.toMatchObject({
        code: 'validation_failed',
      });
    }
    // A default stored before this check is refused when it would be used.
    const t = await createTenant(s.ctx, 'Me <me@my-verified.test>');
    await s.ctx.c.database.db
      .updateTable('tenants')
      .set({ default_from: SPOOFS[2] })
      .where('id', '=', t.tenantId)
      .execute();
    const res = await call(s.ctx.app, 'POST', '/v1/transmissions', {
      key: t.apiKey,
      body: { recipients: [{ email: 'ann@example.net' }], content: { subject: 'Hi', text: 'Hello' } },
    });
    expectInvalid(res, 'content.from');
  });
});

describe('SMTP submission: every From mailbox and the Sender must be on a verified domain', () => {
  async function submit(headers: { from: string; extra?: string[] }) {
    const c = await RawClient.ready(s.smtp.port, s.cred);
    try {
      return await sendRaw(c, ['ann@example.net'], message({ from: headers.from, headers: headers.extra ?? [] }));
    } finally {
      c.destroy();
    }
  }

  it('refuses a From whose second mailbox is on a foreign domain with 550 5.7.1', async () => {
    expect(await submit({ from: 'Me <me@my-verified.test>, Boss <ceo@other-tenant.test>' })).toMatch(
      /^550 5\.7\.1 .*other-tenant\.test/,
    );
    expect(await submit({ from: 'me@my-verified.test, ceo@bank.test' })).toMatch(/^550 5\.7\.1 .*bank\.test/);
    // Groups are flattened: every member counts.
    expect(await submit({ from: 'Team: me@my-verified.test, ceo@bank.test;' })).toMatch(/^550 5\.7\.1 .*bank\.test/);
  });

  it('refuses a Sender header on a foreign domain with 550 5.7.1', async () => {
    expect(await submit({ from: 'Me <me@my-verified.test>', extra: ['Sender: Boss <ceo@other-tenant.test>'] })).toMatch(
      /^550 5\.7\.1 .*other-tenant\.test/,
    );
  });

  it('refuses a From display name holding a foreign address with 550 5.7.1', async () => {
    expect(await submit({ from: '"ceo@bank.test" <me@my-verified.test>' })).toMatch(/^550 5\.7\.1 /);
  });

  it('refuses a Resent-From or Resent-Sender on a foreign domain with 550 5.7.1, like From and Sender', async () => {
    const from = 'Me <me@my-verified.test>';
    expect(await submit({ from, extra: ['Resent-From: Boss <ceo@other-tenant.test>'] })).toMatch(
      /^550 5\.7\.1 .*other-tenant\.test/,
    );
    expect(await submit({ from, extra: ['Resent-From: me@my-verified.test, ceo@bank.test'] })).toMatch(
      /^550 5\.7\.1 .*bank\.test/,
    );
    expect(await submit({ from, extra: ['Resent-Sender: ceo@bank.test'] })).toMatch(/^550 5\.7\.1 .*bank\.test/);
    // One resent block per resending: the second block is checked as well as the first.
    expect(
      await submit({
        from,
        extra: ['Resent-From: me@my-verified.test', 'Resent-From: Boss <ceo@other-tenant.test>'],
      }),
    ).toMatch(/^550 5\.7\.1 .*other-tenant\.test/);
    expect(await submit({ from, extra: ['Resent-From: "ceo@bank.test" <me@my-verified.test>'] })).toMatch(
      /^550 5\.7\.1 .*Resent-From.*display name/,
    );
    expect(await submit({ from, extra: ['Resent-Sender: a@my-verified.test, b@my-verified.test'] })).toMatch(
      /^5\d\d .*Resent-Sender/,
    );
  });

  it('accepts Resent-From and Resent-Sender on verified domains', async () => {
    const reply = await submit({
      from: 'Me <me@my-verified.test>',
      extra: ['Resent-From: You <you@mail.my-verified.test>', 'Resent-Sender: me@my-verified.test'],
    });
    expect(queuedId(reply)).toBeTruthy();
  });

  it('accepts several From mailboxes and a Sender when all are on verified domains', async () => {
    const reply = await submit({
      from: 'Me <me@my-verified.test>, You <you@mail.my-verified.test>',
      extra: ['Sender: "me@my-verified.test" <me@my-verified.test>'],
    });
    expect(queuedId(reply)).toBeTruthy();
  });
});
