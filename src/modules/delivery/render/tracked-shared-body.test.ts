/**
 * Tracked mail through a shared body (shared-body.ts, tracking/render-plan.ts): the body composed
 * once with placeholder tokens, each message's own tokens written over them, must be byte for
 * byte the message a full per-message composition gives, including where quoted-printable breaks
 * a line inside a token, and List-Unsubscribe in the header.
 */
import { randomUUID } from 'node:crypto';
import { beforeEach, describe, expect, it } from 'vitest';
import {
  applyTracking,
  messageTokens,
  sharedTrackedParts,
  tokenSetsBuilt,
  type TrackingPlan,
} from '../../tracking/render-plan.ts';
import { deriveTokenKey, verifyToken } from '../../tracking/token.ts';
import { dkimBodyHash } from './dkim.ts';
import { buildMessage } from './mime.ts';
import { clearSharedBodies, fromSharedBody, messageBytes, type SharedInput } from './shared-body.ts';

const sameBoundary = (raw: string) => raw.replace(/--_NmP-[0-9a-f]+-Part_/g, '--_NmP-BOUNDARY-Part_');

const plan: TrackingPlan = {
  base: 'https://click.example.com',
  key: deriveTokenKey(Buffer.alloc(32, 7)),
  open: true,
  click: true,
  unsubscribe: true,
  feedbackId: 'autumn:marketing:t1:postyard',
};

// Links of several lengths, so quoted-printable soft breaks fall inside tokens somewhere.
const html = `<html><body>${Array.from(
  { length: 20 },
  (_, i) =>
    `<p>${'x'.repeat(i)}  \t  <a href="https://shop.example/p/${i}?utm=${'a'.repeat(i * 3)}&amp;n=${i}">item ${i}</a></p>`,
).join(
  '\n',
)}<a data-postyard-track="false" href="https://shop.example/c/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAA">keep</a></body></html>`;

const input: SharedInput = {
  from: 'Shop <shop@mail.example.com>',
  subject: 'Autumn sale',
  text: 'Sale: https://shop.example/p/1\n',
  html,
  headers: {},
  attachments: [],
};

beforeEach(() => clearSharedBodies());

async function viaShared(txId: string, messageUuid: string, to: { email: string }, date: Date) {
  const parts = await fromSharedBody(
    txId,
    to,
    `${messageUuid}@mail.example.com`,
    () => sharedTrackedParts(plan, input, 'bounces.mail.example.com'),
    date,
    (m) => messageTokens(plan, m, messageUuid),
  );
  expect(parts).not.toBeNull();
  // The body hash made by patching the relaxed body equals canonicalizing this body afresh.
  expect(parts?.bodyHash).toBe(dkimBodyHash(parts?.body.toString('latin1') ?? ''));
  const whole = Buffer.concat([Buffer.from(`${parts?.head}\r\n\r\n`, 'latin1'), parts?.body ?? Buffer.alloc(0)]);
  // What the renderer sends: the head and the tokens written straight into one buffer.
  if (parts) expect(messageBytes(parts, Buffer.from(`${parts.head}\r\n\r\n`, 'latin1')).equals(whole)).toBe(true);
  return whole.toString('latin1');
}

describe('tracked shared bodies', () => {
  it('give each message exactly what a full per-message composition gives (tokens in QP-broken lines too)', async () => {
    const date = new Date('2026-11-05T07:08:09Z');
    let brokenInside = 0;
    for (const email of ['ann@example.net', 'bob@example.net', 'carol@example.org']) {
      const id = randomUUID();
      const shared = await viaShared('tx-tracked', id, { email }, date);
      const full = (
        await buildMessage({
          ...applyTracking(plan, id, input, 'bounces.mail.example.com'),
          to: { email },
          messageId: `${id}@mail.example.com`,
          date,
        })
      ).toString('latin1');
      expect(sameBoundary(shared)).toBe(sameBoundary(full));
      // Every token in the message is this message's, and verifies.
      const unfolded = shared.replace(/=\r\n/g, '');
      const tokens = [...unfolded.matchAll(/\/([cou])\/([A-Za-z0-9_-]{24,})/g)];
      expect(tokens.length).toBe(20 + 1 + 1 + 1); // links, the untracked look-alike, pixel, List-Unsubscribe
      for (const [, kind, tok] of tokens) {
        const t = verifyToken(plan.key, tok as string, kind === 'c' ? 'click' : kind === 'o' ? 'open' : 'unsubscribe');
        if (tok?.startsWith('AAAA')) continue; // the untracked link, left as written
        expect(t?.messageId).toBe(id);
      }
      brokenInside += [...shared.matchAll(/\/c\/[A-Za-z0-9_-]*=\r\n/g)].length;
    }
    // The case this is about happened: quoted-printable broke a line inside a token.
    expect(brokenInside).toBeGreaterThan(0);
  });

  it('lays the tokens out once per body when every message brings its own copy of the plan (render threads)', async () => {
    // A render thread gets the plan by structured clone with each message: a new key object every
    // time, the same bytes. The token layout must still be made once, not per message.
    const built = tokenSetsBuilt.count;
    for (const email of ['ann@example.net', 'bob@example.net', 'carol@example.org']) {
      const own = structuredClone(plan);
      const id = randomUUID();
      const parts = await fromSharedBody(
        'tx-cloned-plan',
        { email },
        `${id}@mail.example.com`,
        () => sharedTrackedParts(own, input, 'bounces.mail.example.com'),
        new Date(),
        (m) => messageTokens(own, m, id),
      );
      const text = parts?.body.toString('latin1').replace(/=\r\n/g, '') ?? '';
      const click = /\/c\/([A-Za-z0-9_-]{24,})/.exec(text)?.[1] ?? '';
      expect(verifyToken(plan.key, click, 'click')?.messageId).toBe(id);
    }
    expect(tokenSetsBuilt.count - built).toBe(1);
  });

  it('falls back (no shared body) when a marker is not found in the encoded message', async () => {
    // Non-ASCII-heavy html makes MailComposer pick base64 for the part: placeholders are not visible.
    const b64: SharedInput = { ...input, html: `${'€'.repeat(20_000)}${html}` };
    const parts = await fromSharedBody(
      'tx-b64',
      { email: 'ann@example.net' },
      'm@mail.example.com',
      () => sharedTrackedParts(plan, b64, 'bounces.mail.example.com'),
      new Date(),
      (m) => messageTokens(plan, m, randomUUID()),
    );
    expect(parts).toBeNull();
  });
});

describe('tracked shared bodies and the tracking host name', () => {
  it('a transmission whose tracking base changes mid-way gives later messages the new base', async () => {
    const { renderMessage } = await import('./renderer.ts');
    const { generateDkimKeyPair } = await import('./dkim.ts');
    const keys = generateDkimKeyPair();
    const tx = {
      id: randomUUID(),
      content: {
        subject: 'Sale',
        from: 'Shop <shop@mail.example.com>',
        reply_to: null,
        text: null,
        html,
        headers: {},
        attachments: [],
        template_id: null,
      },
      raw: null,
      options: { tracking: plan },
      fromDomain: 'mail.example.com',
    };
    const key = (trackingBase?: string) => ({
      domainName: 'mail.example.com',
      keySelector: 's1',
      privateKeyPem: keys.privateKeyPem,
      returnPathDomain: 'bounces.mail.example.com',
      ...(trackingBase ? { trackingBase } : {}),
    });
    const msg = (i: number) =>
      ({ id: randomUUID(), recipient: `r${i}@example.net`, recipient_name: null, substitution_data: null }) as never;
    const first = await renderMessage(msg(1), tx, key(), 'verp', 'bounce.example.com');
    expect(first.raw.toString('latin1')).toContain('https://click.example.com/c/');
    const later = await renderMessage(msg(2), tx, key('https://click.shop.example'), 'verp', 'bounce.example.com');
    const text = later.raw.toString('latin1').replace(/=\r\n/g, '');
    expect(text).toContain('https://click.shop.example/c/');
    expect(text).not.toContain('https://click.example.com/');
  });
});
