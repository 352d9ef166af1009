import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Container } from '../../src/container.ts';
import { createLogger } from '../../src/logger.ts';
import { type RunningInbound, startInboundServer } from '../../src/smtp/inbound-listener.ts';
import { VerpSigner } from '../../src/modules/outcomes/verp.ts';
import { deriveTokenKey, signToken } from '../../src/modules/tracking/token.ts';
import * as corpus from './corpus.ts';
import { deliver, eventsOf, type Harness, sendInbound, startHarness } from './harness.ts';

/**
 * Issue 17: "every inbound message that matched nothing is counted and logged (no body), never
 * an error", and auto-replies are "ignored, counted in a metric". Checked where an operator
 * sees them: the log lines of the listener (captured here from its own logger) and GET /metrics.
 */
let h: Harness;
let inbound: RunningInbound;
const lines: Record<string, unknown>[] = [];
/** A word that appears only in the bodies sent: it must never reach a log line. */
const SECRET = 'Zanzibar-7f3c-body-text';

beforeAll(async () => {
  h = await startHarness();
  // A second listener on the same container whose log lines are kept.
  const sink = new Writable({
    write(chunk, _enc, done) {
      for (const l of String(chunk).split('\n')) if (l.trim()) lines.push(JSON.parse(l) as Record<string, unknown>);
      done();
    },
  });
  const logged = Object.create(h.ctx.c, { logger: { value: createLogger('info', sink) } }) as Container;
  inbound = await startInboundServer(logged, { port: 0, host: '127.0.0.1' });
});
afterAll(async () => {
  await inbound?.close();
  await h?.close();
});

async function metric(result: string): Promise<number> {
  const res = await h.ctx.app.inject({ method: 'GET', url: '/metrics' });
  expect(res.statusCode).toBe(200);
  const m = new RegExp(`^postyard_inbound_messages_total\\{result="${result}"\\} (\\d+)`, 'm').exec(res.body);
  return m ? Number(m[1]) : 0;
}

const unmatchedLogs = () => lines.filter((l) => l.msg === 'inbound message matched no message');

describe('what matched nothing, and auto-replies', () => {
  it('a DSN for no message of ours: 250, counted unmatched on /metrics, logged without the body', async () => {
    const before = await metric('unmatched');
    const logsBefore = unmatchedLogs().length;
    const to = `bounces+${new VerpSigner(h.ctx.c.masterKey).sign(randomUUID())}@bounce.postyard.test`;
    const raw = corpus
      .postfixDsn({ envelopeFrom: to, recipient: 'x@dest.test', messageId: randomUUID() })
      .replace('This is the mail system', `${SECRET} This is the mail system`);
    const info = await sendInbound(inbound.port, [to], raw, '');
    expect(info.response).toMatch(/^250 .*unmatched/);
    expect(await metric('unmatched')).toBe(before + 1);
    const logged = unmatchedLogs().slice(logsBefore);
    expect(logged).toHaveLength(1);
    expect(logged[0]).toMatchObject({ target: 'verp', kind: 'dsn', bytes: Buffer.byteLength(raw) });
    expect(JSON.stringify(lines)).not.toContain(SECRET);
  });

  it('mail to the mailto unsubscribe address of no message of ours is logged as unmatched too', async () => {
    const before = await metric('unmatched');
    const logsBefore = unmatchedLogs().length;
    const token = signToken(deriveTokenKey(h.ctx.c.masterKey), { kind: 'unsubscribe', messageId: randomUUID() });
    const info = await sendInbound(
      inbound.port,
      [`unsubscribe+${token}@bounce.postyard.test`],
      `From: someone@dest.test\r\nSubject: unsubscribe\r\n\r\n${SECRET}\r\n`,
      'someone@dest.test',
    );
    expect(info.response).toMatch(/^250 .*unmatched/);
    expect(await metric('unmatched')).toBe(before + 1);
    const logged = unmatchedLogs().slice(logsBefore);
    expect(logged).toHaveLength(1);
    expect(logged[0]).toMatchObject({ target: 'unsubscribe', mailFrom: 'someone@dest.test' });
    expect(JSON.stringify(lines)).not.toContain(SECRET);
  });

  it('auto-replies are counted on /metrics and change nothing', async () => {
    const sent = await deliver(h, h.a, 'away@dest.test');
    const before = await metric('auto_reply');
    const samples = Object.values(corpus.AUTO_REPLIES);
    for (const sample of samples) {
      const raw = sample({ envelopeFrom: sent.envelopeFrom, recipient: sent.recipient, messageId: sent.messageId });
      const info = await sendInbound(inbound.port, [sent.envelopeFrom], raw, sent.recipient);
      expect(info.response).toMatch(/^250 .*auto_reply/);
    }
    expect(await metric('auto_reply')).toBe(before + samples.length);
    // Auto-replies are not "matched nothing": no unmatched log line for them.
    expect(unmatchedLogs().filter((l) => l.mailFrom === sent.recipient)).toHaveLength(0);
  });
});

describe('huge reports', () => {
  it('an HTML-only message nested 20,000 elements deep to fbl@: 250, counted unmatched, the listener lives on', async () => {
    const before = await metric('unmatched');
    const html = `${'<div>'.repeat(20_000)}${SECRET}`;
    const raw = `From: anyone@anywhere.test\r\nSubject: hi\r\nContent-Type: text/html\r\n\r\n${html}\r\n`;
    const info = await sendInbound(inbound.port, ['fbl@bounce.postyard.test'], raw, 'anyone@anywhere.test');
    expect(info.response).toMatch(/^250 .*unmatched/);
    expect(await metric('unmatched')).toBe(before + 1);
    const again = await sendInbound(inbound.port, ['fbl@bounce.postyard.test'], raw, 'anyone@anywhere.test');
    expect(again.response).toMatch(/^250 /);
  });

  it('a 9 MB DSN whose status part comes after an 8 MB attachment still bounces its message', async () => {
    const sent = await deliver(h, h.a, 'huge-dsn@dest.test');
    const boundary = '--4XyZ1.1764126060/mx1.dest.test';
    const line = `${'QUJD'.repeat(19)}\r\n`; // 76 base64 characters
    const attachment = [
      boundary,
      'Content-Type: application/octet-stream; name="original.bin"',
      'Content-Disposition: attachment; filename="original.bin"',
      'Content-Transfer-Encoding: base64',
      '',
      line.repeat(Math.floor((8 * 1024 * 1024) / line.length)),
    ].join('\r\n');
    const dsn = corpus
      .postfixDsn({ envelopeFrom: sent.envelopeFrom, recipient: sent.recipient, messageId: sent.messageId })
      .replace(
        `${boundary}\r\nContent-Description: Delivery report`,
        `${attachment}${boundary}\r\nContent-Description: Delivery report`,
      );
    expect(dsn.length).toBeGreaterThan(8 * 1024 * 1024);
    expect(dsn.length).toBeLessThan(10 * 1024 * 1024);
    const info = await sendInbound(inbound.port, [sent.envelopeFrom], dsn);
    expect(info.response).toMatch(/^250 .*bounce/);
    const ev = (await eventsOf(h, sent.messageId)).find((e) => e.type === 'message.bounced');
    expect(ev?.data).toMatchObject({ async: true, enhanced_code: '5.1.1' });
  });
});
