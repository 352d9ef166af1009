import { randomUUID } from 'node:crypto';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { VerpSigner } from '../../src/modules/outcomes/verp.ts';
import { nodeEnv } from '../helpers/cluster.ts';
import { createTestContext, type TestContext } from '../helpers/context.ts';
import { metricValue } from '../helpers/metrics.ts';
import {
  freePort,
  killChildren,
  type ServerProcess,
  SPAWN_TEST_TIMEOUT_MS,
  startServer,
} from '../helpers/server-process.ts';
import { sendInbound } from './harness.ts';

/**
 * Issue 31 item 2: anyone may send mail to the inbound listener, so reading a message must cost
 * its size, never its square. Sent to a real node in the default configuration (`postyard
 * start`: all roles in one process, render threads on) sharing the test database (SQLite, or the
 * PostgreSQL of TEST_DATABASE_URL), over SMTP on loopback, to `fbl@<bounce host>` and to a signed
 * VERP address. Before the fix, reading the 64 KB line of address characters cost 6-8 s of
 * main-thread CPU (the plain-text bounce address pattern), 64 KB of spaces in a quoted-printable
 * part 9 s (libqp), and the HTML below took seconds in html-to-text (before an earlier issue 31 fix
 * limited its depth, nested <div>s overflowed its stack: an uncaught exception that ended the
 * process). The node must answer each message at once and keep its event loop free, /healthz and
 * new SMTP connections answering, meanwhile.
 */
const BOUNCE_HOST = 'bounce.postyard.test';

let ctx: TestContext;
let node: ServerProcess;
let inboundPort: number;

beforeAll(async () => {
  ctx = await createTestContext();
  inboundPort = await freePort();
  node = await startServer([], {
    env: nodeEnv(ctx, {
      POSTYARD_INBOUND_PORT: String(inboundPort),
      POSTYARD_INBOUND_HOST: '127.0.0.1',
      POSTYARD_BOUNCE_HOST: BOUNCE_HOST,
      POSTYARD_EHLO_NAME: 'postyard.test',
    }),
  });
}, SPAWN_TEST_TIMEOUT_MS);

afterAll(async () => {
  await node?.stop();
  killChildren();
  await ctx?.close();
});

/** A notice from MAILER-DAEMON with a bounce subject: read by the plain-text heuristics. */
function notice(to: string, contentType: string, body: string, encoding = '7bit'): string {
  return [
    'From: MAILER-DAEMON@mx.attacker.test',
    `To: ${to}`,
    'Subject: Undelivered Mail Returned to Sender',
    `Message-ID: <${randomUUID()}@mx.attacker.test>`,
    'MIME-Version: 1.0',
    `Content-Type: ${contentType}`,
    `Content-Transfer-Encoding: ${encoding}`,
    '',
    body,
    '',
  ].join('\r\n');
}

/** One line of address characters without an '@': the old pattern retried it from every position. */
const ADDRESS_RUN = `Delivery to ${'a'.repeat(64 * 1024 - 100)} failed`;

/**
 * 192 KB of nested <div>, then 192 KB of closing tags that close nothing: a parser that keeps a
 * stack of open elements searches all of it for each one (html-to-text's htmlparser2 did).
 */
const NESTED_HTML = `${'<div>'.repeat((192 * 1024) / 5)}${'</span>'.repeat((192 * 1024) / 7)}550 5.1.1 user unknown`;

/** The node's /metrics ('' when it does not answer: it may have died). */
function scrape(): Promise<string> {
  return fetch(`${node.baseUrl}/metrics`, { signal: AbortSignal.timeout(30_000) }).then(
    (r) => r.text(),
    () => '',
  );
}

const sample = (text: string, name: string) => metricValue(text, name) ?? Number.NaN;

/** Seconds until the listener's greeting on a new connection. */
function greetingSeconds(port: number): Promise<number> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const socket = net.connect({ port, host: '127.0.0.1' });
    socket.setTimeout(60_000, () => socket.destroy(new Error('no greeting within 60 s')));
    socket.once('data', (d) => {
      const seconds = (performance.now() - started) / 1000;
      socket.end('QUIT\r\n');
      if (String(d).startsWith('220 ')) resolve(seconds);
      else reject(new Error(`greeting: ${String(d)}`));
    });
    socket.once('error', reject);
  });
}

describe('what reading inbound mail costs', { timeout: SPAWN_TEST_TIMEOUT_MS }, () => {
  it('crafted reports to fbl@ and to a VERP address are answered at once; the event loop, /healthz and SMTP stay free', async () => {
    const verp = `bounces+${new VerpSigner(ctx.c.masterKey).sign(randomUUID())}@${BOUNCE_HOST}`;
    const fbl = `fbl@${BOUNCE_HOST}`;
    const attacks: [string, string][] = [
      [fbl, notice(fbl, 'text/plain; charset=us-ascii', ADDRESS_RUN)],
      [verp, notice(verp, 'text/plain; charset=us-ascii', ADDRESS_RUN)],
      [fbl, notice(fbl, 'text/plain; charset=us-ascii', `${' '.repeat(64 * 1024)}x`, 'quoted-printable')],
      [verp, notice(verp, 'text/html; charset=us-ascii', NESTED_HTML)],
    ];

    // A scrape resets the event-loop lag maximum: the next one gives the worst delay in between.
    const cpuBefore = sample(await scrape(), 'process_cpu_seconds_total');

    // Meanwhile, again and again: /healthz, and a new SMTP connection to the listener.
    let polling = true;
    const slowest = async (probe: () => Promise<number>) => {
      let worst = 0;
      while (polling) {
        worst = Math.max(worst, await probe().catch(() => Number.NaN));
        await new Promise((r) => setTimeout(r, 50));
      }
      return worst;
    };
    const healthz = slowest(async () => {
      const started = performance.now();
      const res = await fetch(`${node.baseUrl}/healthz`, { signal: AbortSignal.timeout(60_000) });
      return res.status === 200 ? (performance.now() - started) / 1000 : Number.NaN;
    });
    const greeting = slowest(() => greetingSeconds(inboundPort));

    const answers: { response: string; seconds: number }[] = [];
    try {
      for (const [to, raw] of attacks) {
        const started = performance.now();
        const response = await sendInbound(inboundPort, [to], raw, '').then(
          (info) => info.response,
          (err: Error) => `no answer: ${err.message}`,
        );
        answers.push({ response, seconds: (performance.now() - started) / 1000 });
      }
    } finally {
      polling = false;
    }
    const slowestHealthz = await healthz;
    const slowestGreeting = await greeting;
    const after = await scrape();
    const lagMax = sample(after, 'nodejs_eventloop_lag_max_seconds');
    const cpu = sample(after, 'process_cpu_seconds_total') - cpuBefore;
    const figures = JSON.stringify({ answers, slowestHealthz, slowestGreeting, lagMax, cpu });

    // Nothing of ours: every one is answered 250 and counted unmatched.
    for (const a of answers) expect(a.response, figures).toMatch(/^250 .*unmatched/);
    // Measured on a loaded 2-core machine, SQLite and PostgreSQL alike: each answer in 0.1-0.6 s
    // (a new SMTP connection each), event-loop lag, /healthz and a greeting at most 0.26 s, under
    // 0.2 s of CPU for all four. Before the fix (main at 3124ab3): answers after 24, 28, 38 and 8 s,
    // /healthz, a greeting and the event loop held up to 38 s, 23.7 s of CPU; before the depth
    // limit the fourth was never answered (the process had died).
    for (const a of answers) expect(a.seconds, figures).toBeLessThan(3);
    expect(lagMax, figures).toBeLessThan(2);
    expect(slowestHealthz, figures).toBeLessThan(2);
    expect(slowestGreeting, figures).toBeLessThan(2);
    expect(cpu, figures).toBeLessThan(4);
  });
});
