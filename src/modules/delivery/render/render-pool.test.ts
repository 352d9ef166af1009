import { promises as dns } from 'node:dns';
import { simpleParser } from 'mailparser';
import { dkimVerify } from 'mailauth';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type DnsServer, startDnsServer } from '../../../../test/peers/dns-server.ts';
import type { MessagesTable } from '../../../db/schema.ts';
import { dkimDnsRecordValue, generateDkimKeyPair } from './dkim.ts';
import { RenderPool } from './render-pool.ts';
import type { RenderRequest } from './renderer.ts';

const keys = generateDkimKeyPair();
const logger = pino({ level: 'silent' });
let dnsServer: DnsServer;
let resolver: dns.Resolver;

beforeAll(async () => {
  dnsServer = await startDnsServer({
    's1._domainkey.mail.example.com': { TXT: [dkimDnsRecordValue(keys.publicKeyBase64).match(/.{1,255}/g) ?? []] },
  });
  resolver = new dns.Resolver({ timeout: 2000, tries: 1 });
  resolver.setServers([dnsServer.address]);
});
afterAll(() => dnsServer.close());

function request(i: number): RenderRequest {
  const now = new Date().toISOString();
  const msg: MessagesTable = {
    tenant_id: 't1',
    id: `0193-msg-${i}`,
    transmission_id: 'tx1',
    recipient: `r${i}@dest.example`,
    recipient_name: null,
    recipient_domain: 'dest.example',
    substitution_data: JSON.stringify({ name: `<b>${i}</b>` }),
    metadata: null,
    state: 'queued',
    attempt_count: 0,
    next_attempt_at: now,
    locked_until: null,
    locked_by: null,
    last_response: null,
    created_at: now,
    updated_at: now,
  };
  return {
    msg,
    tx: {
      id: 'tx1',
      content: {
        subject: 'Order {{name}}',
        from: 'Shop <shop@mail.example.com>',
        reply_to: null,
        text: 'Hello {{name}}',
        html: '<p>Hello {{name}}</p>',
        headers: {},
        attachments: [{ filename: 'a.bin', content_type: 'application/octet-stream', data: 'AAEC/w==' }],
        template_id: null,
      },
      raw: null,
      options: {},
      fromDomain: 'mail.example.com',
    },
    key: {
      domainName: 'mail.example.com',
      keySelector: 's1',
      privateKeyPem: keys.privateKeyPem,
      returnPathDomain: 'rp.mail.example.com',
    },
    verpToken: `token${i}`,
    bounceHost: 'bounce.example.net',
  };
}

async function verify(raw: Buffer) {
  const res = await dkimVerify(raw, {
    resolver: async (name: string, type: string) => {
      if (type !== 'TXT') throw Object.assign(new Error('unexpected'), { code: 'ENOTFOUND' });
      return resolver.resolveTxt(name);
    },
  });
  return res.results.map((r: { status: { result: string } }) => r.status.result);
}

describe('RenderPool (messages built and signed on worker threads)', () => {
  it('renders many messages across two threads, each with its own substitution and a valid DKIM signature', async () => {
    const pool = new RenderPool(2, logger);
    try {
      const out = await Promise.all(Array.from({ length: 40 }, (_, i) => pool.render(request(i))));
      for (const [i, r] of out.entries()) {
        expect(r.signed).toBe(true);
        expect(r.envelopeFrom).toBe(`bounces+token${i}@rp.mail.example.com`);
        const mail = await simpleParser(r.raw);
        expect(mail.subject).toBe(`Order <b>${i}</b>`);
        expect(mail.html).toContain(`Hello &lt;b&gt;${i}&lt;/b&gt;`);
        expect(mail.to && 'value' in mail.to ? mail.to.value[0]?.address : null).toBe(`r${i}@dest.example`);
      }
      expect(await verify(out[0]?.raw as Buffer)).toEqual(['pass']);
      expect(await verify(out[39]?.raw as Buffer)).toEqual(['pass']);
    } finally {
      await pool.close();
    }
  });

  it('loses nothing when a thread ends with work in hand: those messages are rendered on a new thread', async () => {
    const logged: string[] = [];
    const pool = new RenderPool(1, pino({ level: 'error' }, { write: (line: string) => logged.push(line) }));
    try {
      await pool.render(request(0)); // the thread is up
      const inHand = Array.from({ length: 20 }, (_, i) => pool.render(request(i)));
      // Kill the thread while it holds the 20 requests.
      const threads = (pool as unknown as { threads: { worker: { terminate(): Promise<number> } }[] }).threads;
      await threads[0]?.worker.terminate();
      const out = await Promise.all(inHand);
      expect(out.map((r) => r.envelopeFrom)).toEqual(
        Array.from({ length: 20 }, (_, i) => `bounces+token${i}@rp.mail.example.com`),
      );
      expect(await verify(out[19]?.raw as Buffer)).toEqual(['pass']);
      // The hand-over really ran (the thread did not finish everything before it died).
      expect(logged.join('')).toContain('render thread stopped');
      // A new thread serves later work.
      expect((await pool.render(request(99))).signed).toBe(true);
    } finally {
      await pool.close();
    }
  });

  it("starts a new transmission's first message behind what came before it, not behind everything that comes while its body is composed", async () => {
    // Text-only mail whose body the thread keeps renders synchronously; a new transmission's body
    // is composed by MailComposer over several event-loop turns. Requests used to start as their
    // messages arrived, up to ~1,000 per turn, so with 40 in hand (the worker's 5 lanes x 8 ahead)
    // a password reset waited behind ~2,000 bulk renders (test/pacing/fairness.test.ts in CI).
    const pool = new RenderPool(1, logger);
    const plain = (i: number, txId: string): RenderRequest => {
      const r = request(i);
      return {
        ...r,
        msg: { ...r.msg, transmission_id: txId, substitution_data: null },
        tx: {
          ...r.tx,
          id: txId,
          content: { ...r.tx.content, html: null, attachments: [], text: 'Everything must go' },
        },
      };
    };
    let done = 0;
    let stop = false;
    try {
      await pool.warm();
      const flood = Array.from({ length: 40 }, async (_, k) => {
        for (let i = k; !stop; i += 40) {
          await pool.render(plain(i, 'bulk'));
          done++;
        }
      });
      await new Promise((r) => setTimeout(r, 300));
      const meanwhile: number[] = [];
      for (let p = 0; p < 3; p++) {
        const before = done;
        const reset = await pool.render(plain(p, `reset-${p}`));
        meanwhile.push(done - before);
        expect(reset.signed).toBe(true);
        await new Promise((r) => setTimeout(r, 100));
      }
      stop = true;
      await Promise.all(flood);
      // The 40 ahead of it, and STARTS_PER_TURN (16) per turn while its body is composed (a few turns).
      expect(Math.max(...meanwhile), `bulk renders finished meanwhile: ${meanwhile.join(', ')}`).toBeLessThan(300);
    } finally {
      stop = true;
      await pool.close();
    }
  });

  it('close() finishes what was in hand', async () => {
    const pool = new RenderPool(1, logger);
    const inHand = Array.from({ length: 10 }, (_, i) => pool.render(request(i)));
    await pool.close();
    expect((await Promise.all(inHand)).every((r) => r.signed)).toBe(true);
  });
});

describe('the render threads watchdog', () => {
  const STUB = new URL('../../../../test/helpers/threads/render-thread-stub.js', import.meta.url);
  const to = (recipient: string, i: number): RenderRequest => {
    const r = request(i);
    return { ...r, msg: { ...r.msg, recipient } };
  };

  it('replaces a thread that stalls: the message it was rendering fails, the others render on a new thread', async () => {
    const pool = new RenderPool(1, logger, 16, 500, STUB);
    try {
      await pool.warm();
      expect(await pool.render(to('first@dest.example', 1)).then((r) => r.raw.toString())).toContain('first@');
      const started = performance.now();
      const stalled = pool.render(to('stall@dest.example', 2));
      const behind = [3, 4, 5].map((i) => pool.render(to(`r${i}@dest.example`, i)));
      await expect(stalled).rejects.toThrow(
        /^render_failed: rendering took longer than 0.5 s \(the render thread was replaced\)$/,
      );
      const rendered = await Promise.all(behind);
      expect(rendered.map((r) => r.raw.toString().split('\r\n')[0])).toEqual([
        'To: r3@dest.example',
        'To: r4@dest.example',
        'To: r5@dest.example',
      ]);
      expect(performance.now() - started).toBeLessThan(10_000);
      expect(pool.replaced).toBe(1);
    } finally {
      await pool.close();
    }
  });

  it('does not count an idle thread’s silence against new work', async () => {
    const pool = new RenderPool(1, logger, 16, 300, STUB);
    try {
      await pool.warm();
      await new Promise((r) => setTimeout(r, 800));
      await pool.render(to('late@dest.example', 6));
      expect(pool.replaced).toBe(0);
    } finally {
      await pool.close();
    }
  });
});
