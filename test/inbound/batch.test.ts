import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as corpus from './corpus.ts';
import {
  deliver,
  eventsOf,
  type Harness,
  inboundCount,
  type Sent,
  sendInbound,
  startHarness,
  stateOf,
  suppressionOf,
} from './harness.ts';

/**
 * Reports arriving together are written together (src/modules/feedback/report-batch.ts: one
 * lookup, one UPDATE, one events insert per batch). Sent at once over separate connections,
 * they must each get their 250 only with their own effect, and reports about the same message
 * in one batch must act as if they came one after another.
 */
let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(() => h?.close());

const original = (s: Sent) => ({ envelopeFrom: s.envelopeFrom, recipient: s.recipient, messageId: s.messageId });

describe('reports received at the same time', () => {
  it('12 DSNs, a repeat and a complaint at once: each message bounced once, the complaint once', async () => {
    const sent: Sent[] = [];
    for (let i = 0; i < 12; i++) sent.push(await deliver(h, h.a, `batch${i}@dest.test`));
    const [first, second] = sent as [Sent, Sent];
    const before = await inboundCount(h, 'bounce');
    const answers = await Promise.all([
      ...sent.map((s) => sendInbound(h.inbound.port, [s.envelopeFrom], corpus.postfixDsn(original(s)))),
      // The same DSN again (an MTA retrying after a lost 250), and a complaint about another.
      sendInbound(h.inbound.port, [first.envelopeFrom], corpus.postfixDsn(original(first))),
      sendInbound(
        h.inbound.port,
        ['fbl@bounce.postyard.test'],
        corpus.yahooArf(original(second), 'fbl@bounce.postyard.test'),
        'feedbackloop@yahoo.test',
      ),
    ]);
    for (const a of answers) expect(a.response).toMatch(/^250 .*(bounce|complaint)/);
    expect(await inboundCount(h, 'bounce')).toBe(before + 13);
    for (const s of sent) {
      expect(await stateOf(h, s.messageId)).toBe('bounced');
      const types = (await eventsOf(h, s.messageId)).map((e) => e.type);
      expect(
        types.filter((t) => t === 'message.bounced'),
        s.recipient,
      ).toHaveLength(1);
      expect(await suppressionOf(h, h.a.tenantId, s.recipient)).toBeDefined();
    }
    const complaints = (await eventsOf(h, second.messageId)).filter((e) => e.type === 'message.complained');
    expect(complaints).toHaveLength(1);
    // The complaint came with or after the bounce; the address is suppressed either way.
    expect(['hard_bounce', 'complaint']).toContain(
      (await suppressionOf(h, h.a.tenantId, second.recipient))?.reason_category,
    );
  });

  it("an async bounce and a complaint count against the warmup day of the message's source address", async () => {
    const [bouncing, complained] = [await deliver(h, h.a, 'warm1@dest.test'), await deliver(h, h.a, 'warm2@dest.test')];
    const db = h.ctx.c.database.db;
    // As the source picker leaves them (src/modules/ip-pools/source-picker.ts): the address the
    // message left from, and that address's counters for today (warmup).
    await db
      .updateTable('messages')
      .set({ source_address: '127.0.0.9' })
      .where('id', 'in', [bouncing.messageId, complained.messageId])
      .execute();
    const period = `d:${new Date().toISOString().slice(0, 10)}`;
    await db
      .insertInto('warmup_counters')
      .values({ address: '127.0.0.9', period, sent: 2, bounced: 0, complained: 0 })
      .execute();
    await Promise.all([
      sendInbound(h.inbound.port, [bouncing.envelopeFrom], corpus.postfixDsn(original(bouncing))),
      sendInbound(
        h.inbound.port,
        ['fbl@bounce.postyard.test'],
        corpus.yahooArf(original(complained), 'fbl@bounce.postyard.test'),
        'feedbackloop@yahoo.test',
      ),
    ]);
    // The repeat changes nothing: counted once each.
    await sendInbound(h.inbound.port, [bouncing.envelopeFrom], corpus.postfixDsn(original(bouncing)));
    const row = await db
      .selectFrom('warmup_counters')
      .selectAll()
      .where('address', '=', '127.0.0.9')
      .where('period', '=', period)
      .executeTakeFirstOrThrow();
    expect({ bounced: row.bounced, complained: row.complained }).toEqual({ bounced: 1, complained: 1 });
  });
});
