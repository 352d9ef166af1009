/**
 * What the mail-path metrics cost per delivered message (issue 20 item 4: "negligible on the hot
 * path"), against the cheapest unavoidable per-message CPU work in the same run: the DKIM
 * signature of a 2 KB message (RSA-2048). Per message the worker does: one claimed-messages
 * increment, one outcome (attempts counter with two labels, acceptance-to-delivery histogram),
 * one render observation (two histograms), one webhook POST count with its lag.
 *
 *   node --import tsx bench/metrics-overhead.ts          (BENCH_ROUNDS=5 by default)
 *
 * Prints ns per message for each and the ratio metrics / signature (median of the rounds).
 */
import { Registry } from 'prom-client';
import { mailMetrics } from '../src/metrics/mail-metrics.ts';
import { countOutcome, observeRender } from '../src/modules/delivery/delivery-metrics.ts';
import { countWebhookPost } from '../src/modules/webhooks/webhook-metrics.ts';
import type { Outcome } from '../src/modules/outcomes/outcomes.ts';
import { dkimSign, generateDkimKeyPair } from '../src/modules/delivery/render/dkim.ts';
import type { Job } from '../src/modules/webhooks/jobs.ts';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const m = mailMetrics(new Registry());
const keys = generateDkimKeyPair();
const raw = Buffer.from(
  `From: Shop <news@shop.test>\r\nTo: ann@example.com\r\nSubject: Your order\r\nDate: Thu, 26 Nov 2026 10:00:00 +0000\r\n` +
    `Message-ID: <1@shop.test>\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n${'Hello, your order has shipped.\r\n'.repeat(64)}`,
  'latin1',
);
const sign = { domainName: 'shop.test', keySelector: 's1', privateKey: keys.privateKeyPem };
const outcome = {
  kind: 'delivered',
  msg: { created_at: new Date(Date.now() - 1500).toISOString() },
  mailType: 'transactional',
  tags: [],
  attempt: { mxHost: 'mx1.dest.example' },
} as unknown as Outcome;
const rendered = { envelopeFrom: 'b@x', raw, signed: true, renderMs: 0.8, dkimMs: 0.4 };
const job = { parts: [{ unit: { oldestEventAt: new Date(Date.now() - 200).toISOString() } }] } as unknown as Job;
const posted = { ok: true, statusCode: 200, durationMs: 5, error: null, retryAfterMs: null, gone: false };

function nsPer(n: number, fn: () => void): number {
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < n; i++) fn();
  return Number(process.hrtime.bigint() - t0) / n;
}

const metricsPerMessage = () => {
  m.claimedMessages.inc(1);
  countOutcome(m, outcome);
  observeRender(m, rendered);
  countWebhookPost(m, job, posted, Date.now());
};
// Warm both paths up (JIT, key parsing) before measuring.
nsPer(20_000, metricsPerMessage);
nsPer(50, () => dkimSign(raw, sign));

const ratios: number[] = [];
for (let r = 0; r < ROUNDS; r++) {
  const metricsNs = nsPer(200_000, metricsPerMessage);
  const signNs = nsPer(300, () => dkimSign(raw, sign));
  ratios.push(metricsNs / signNs);
  console.log(
    `round ${r + 1}: metrics ${metricsNs.toFixed(0)} ns/message, DKIM signature ${(signNs / 1000).toFixed(0)} µs/message, ratio ${(100 * (metricsNs / signNs)).toFixed(3)} %`,
  );
}
ratios.sort((a, b) => a - b);
console.log(
  `median ratio metrics / DKIM signature: ${(100 * (ratios[Math.floor(ratios.length / 2)] ?? 0)).toFixed(3)} %`,
);
