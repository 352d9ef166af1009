/** The inbound listener's table of recipient handlers (src/smtp/recipient-table.ts), without a server. */
import { randomBytes, randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import { describe, expect, it } from 'vitest';
import type { GroupCommit } from '../db/group-commit.ts';
import type { DB } from '../db/schema.ts';
import { createLogger } from '../logger.ts';
import { FeedbackService } from '../modules/feedback/feedback.service.ts';
import { fblReports, verpReports } from '../modules/feedback/recipients.ts';
import { VerpSigner } from '../modules/outcomes/verp.ts';
import type { SuppressionsService } from '../modules/suppressions/suppressions.service.ts';
import { mailtoUnsubscribe } from '../modules/tracking/mailto-unsubscribe.ts';
import { deriveTokenKey, signToken } from '../modules/tracking/token.ts';
import type { TrackingService } from '../modules/tracking/tracking.service.ts';
import type { InboundRecipient, RecipientDecision, RecipientHandler } from '../mail/recipient-handler.ts';
import { RecipientTable, RELAYING_DENIED, receivedMessage, recipientOf } from './recipient-table.ts';

const client = { address: '192.0.2.7', heloName: 'mx.example.test', secure: false };
const rcpt = (address: string) => recipientOf(address, client);

/** A handler that answers `decide(recipient)` and records that it was asked. */
function handler(
  name: string,
  decide: (r: InboundRecipient) => RecipientDecision<string> | null | Promise<RecipientDecision<string> | null>,
  asked: string[] = [],
): RecipientHandler<string> {
  return {
    name,
    match(r) {
      asked.push(name);
      return decide(r);
    },
    receive: async () => ({ result: name }),
  };
}

async function decidedBy(table: RecipientTable, address: string) {
  const d = await table.decide(rcpt(address));
  return 'accepted' in d ? { handler: d.accepted.handler.name, target: d.accepted.target } : { refused: d.refused };
}

describe('the recipient table', () => {
  it('asks handlers in registration order: the first that claims the address decides, the rest are not asked', async () => {
    const asked: string[] = [];
    const table = new RecipientTable([
      handler('none', () => null, asked),
      handler('first', (r) => (r.local === 'both' ? { accept: 'from first' } : null), asked),
      handler('second', () => ({ accept: 'from second' }), asked),
    ]);
    expect(await decidedBy(table, 'both@x.test')).toEqual({ handler: 'first', target: 'from first' });
    expect(asked).toEqual(['none', 'first']);
    asked.length = 0;
    expect(await decidedBy(table, 'other@x.test')).toEqual({ handler: 'second', target: 'from second' });
    expect(asked).toEqual(['none', 'first', 'second']);
  });

  it('an async handler is awaited, and its own refusal (e.g. 550 5.1.1) is the answer; a later handler is not asked', async () => {
    const asked: string[] = [];
    const unknownUser = { code: 550, enhanced: '5.1.1', text: 'No such user here' };
    const table = new RecipientTable([
      handler('routes', async (r) => (r.domain === 'in.test' ? { refuse: unknownUser } : null), asked),
      handler('catch-all', () => ({ accept: 'any' }), asked),
    ]);
    expect(await decidedBy(table, 'nobody@in.test')).toEqual({ refused: unknownUser });
    expect(asked).toEqual(['routes']);
  });

  it('an address no handler claims is refused 550 5.7.1 (relaying denied); a failing handler rejects', async () => {
    const table = new RecipientTable([handler('none', () => null)]);
    expect(await decidedBy(table, 'someone@gmail.test')).toEqual({ refused: RELAYING_DENIED });
    expect(RELAYING_DENIED).toMatchObject({ code: 550, enhanced: '5.7.1' });
    const failing = new RecipientTable([handler('db', () => Promise.reject(new Error('database down')))]);
    await expect(failing.decide(rcpt('fbl@x.test'))).rejects.toThrow('database down');
  });

  it('splits the address for matching: lower-case local part and domain, the original kept', () => {
    expect(rcpt('Unsubscribe+AbC@Bounce.Example.TEST')).toMatchObject({
      address: 'Unsubscribe+AbC@Bounce.Example.TEST',
      local: 'unsubscribe+abc',
      domain: 'bounce.example.test',
    });
    expect(rcpt('a@b@c.test')).toMatchObject({ local: 'a@b', domain: 'c.test' });
    expect(rcpt('postmaster')).toMatchObject({ local: '', domain: '' });
  });

  it('a received message runs each reader once, however many recipients read it', async () => {
    const message = receivedMessage(Buffer.from('x'), { mailFrom: '', rcptTo: ['a@x.test', 'b@x.test'] }, client);
    let runs = 0;
    const reader = async (raw: Buffer) => {
      runs++;
      return raw.length;
    };
    expect(await Promise.all([message.read(reader), message.read(reader)])).toEqual([1, 1]);
    expect(runs).toBe(1);
  });
});

describe("today's registrations: bounces, complaints and the mailto unsubscribe address", () => {
  const masterKey = randomBytes(32);
  const verp = new VerpSigner(masterKey);
  // Matching reads neither the database writers nor tracking: only tokens and the fbl@ lookup.
  const feedback = new FeedbackService({} as GroupCommit, {} as SuppressionsService, verp, createLogger('silent'));
  const returnPathOwners: Record<string, string[]> = { 'bounces.shop.test': ['tenant-a', 'tenant-a', 'tenant-b'] };
  const db = {
    selectFrom: () => ({
      select: () => ({
        where: (_column: string, _op: string, domain: string) => ({
          execute: async () => (returnPathOwners[domain] ?? []).map((tenant_id) => ({ tenant_id })),
        }),
      }),
    }),
  } as unknown as Kysely<DB>;
  const table = new RecipientTable([
    mailtoUnsubscribe({} as TrackingService, masterKey),
    verpReports(feedback),
    fblReports(feedback, db, 'bounce.postyard.test'),
  ]);

  it('accepts signed VERP and unsubscribe tokens and fbl@ of the bounce host or a registered return-path domain', async () => {
    const messageId = randomUUID();
    const token = verp.sign(messageId);
    expect(await decidedBy(table, `bounces+${token}@bounces.shop.test`)).toEqual({
      handler: 'verp',
      target: { kind: 'verp', messageId },
    });
    // Some MTAs change the case of local parts: the VERP token is read whatever its case.
    expect(await decidedBy(table, `BOUNCES+${token.toUpperCase()}@bounces.shop.test`)).toMatchObject({
      handler: 'verp',
    });
    const unsubscribe = signToken(deriveTokenKey(masterKey), { kind: 'unsubscribe', messageId });
    expect(await decidedBy(table, `unsubscribe+${unsubscribe}@bounces.shop.test`)).toEqual({
      handler: 'unsubscribe',
      target: messageId,
    });
    expect(await decidedBy(table, 'fbl@bounce.postyard.test')).toEqual({
      handler: 'fbl',
      target: { kind: 'fbl', tenants: null },
    });
    expect(await decidedBy(table, 'FBL@Bounces.Shop.test')).toEqual({
      handler: 'fbl',
      target: { kind: 'fbl', tenants: ['tenant-a', 'tenant-b'] },
    });
  });

  it('refuses everything else 550 5.7.1, as the listener always did', async () => {
    const messageId = randomUUID();
    const token = verp.sign(messageId);
    const forged = token.slice(0, -1) + (token.endsWith('a') ? 'b' : 'a');
    const unsubscribe = signToken(deriveTokenKey(masterKey), { kind: 'unsubscribe', messageId });
    for (const address of [
      'someone@gmail.test',
      'postmaster@shop.test',
      'fbl@unknown.test',
      'fbl',
      `bounces+${forged}@bounces.shop.test`,
      `bounces+${messageId}@bounces.shop.test`, // the old, unsigned form
      `bounces+${new VerpSigner(randomBytes(32)).sign(messageId)}@bounces.shop.test`, // another key
      'bounces+@shop.test',
      // The unsubscribe token is case-sensitive (base64url), and only an unsubscribe token will do.
      `unsubscribe+${unsubscribe.toUpperCase()}@bounces.shop.test`,
      `unsubscribe+${token}@bounces.shop.test`,
    ]) {
      expect(await decidedBy(table, address), address).toEqual({ refused: RELAYING_DENIED });
    }
  });
});
