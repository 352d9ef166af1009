import { describe, expect, it } from 'vitest';
import { classifyBounce, MAX_RETRY_AGE_MS, nextAttemptAt, retryDelayMs } from './bounce-rules.ts';

describe('classifyBounce', () => {
  // [reply code, enhanced code, text] -> expected classification
  const cases: [
    number | undefined,
    string | undefined,
    string,
    { transient: boolean; bounceType: string; category: string; suppress: boolean },
  ][] = [
    [550, '5.1.1', 'No such user', { transient: false, bounceType: 'hard', category: 'bad_mailbox', suppress: true }],
    [
      550,
      '5.1.2',
      'Bad destination system',
      { transient: false, bounceType: 'hard', category: 'bad_domain', suppress: true },
    ],
    [
      553,
      '5.1.3',
      'Bad address syntax',
      { transient: false, bounceType: 'hard', category: 'bad_mailbox', suppress: true },
    ],
    [
      556,
      '5.1.10',
      'Recipient address has null MX',
      { transient: false, bounceType: 'hard', category: 'bad_domain', suppress: true },
    ],
    [
      550,
      undefined,
      'User unknown in local recipient table',
      { transient: false, bounceType: 'hard', category: 'bad_mailbox', suppress: true },
    ],
    [
      550,
      undefined,
      'no such user here',
      { transient: false, bounceType: 'hard', category: 'bad_mailbox', suppress: true },
    ],
    [
      550,
      '5.0.0',
      'Mailbox does not exist',
      { transient: false, bounceType: 'hard', category: 'bad_mailbox', suppress: true },
    ],
    [552, '5.2.2', 'Mailbox full', { transient: false, bounceType: 'soft', category: 'mailbox_full', suppress: false }],
    [
      550,
      '5.7.1',
      'Message rejected as spam',
      { transient: false, bounceType: 'block', category: 'spam_block', suppress: false },
    ],
    [550, '5.7.1', 'Relaying denied', { transient: false, bounceType: 'block', category: 'policy', suppress: false }],
    // A block that happens to mention the user is still a block: never suppress on 5.7.x.
    [
      550,
      '5.7.1',
      'Recipient address rejected: user unknown',
      { transient: false, bounceType: 'block', category: 'policy', suppress: false },
    ],
    [
      550,
      '5.7.26',
      'Unauthenticated email is not accepted (DMARC)',
      { transient: false, bounceType: 'block', category: 'authentication', suppress: false },
    ],
    [
      552,
      '5.3.4',
      'Message too big for system',
      { transient: false, bounceType: 'soft', category: 'message_too_large', suppress: false },
    ],
    [
      554,
      undefined,
      'Your IP is listed at Spamhaus',
      { transient: false, bounceType: 'block', category: 'spam_block', suppress: false },
    ],
    [
      451,
      '4.3.0',
      'Temporary local problem',
      { transient: true, bounceType: 'soft', category: 'system', suppress: false },
    ],
    [452, '4.2.2', 'Mailbox full', { transient: true, bounceType: 'soft', category: 'mailbox_full', suppress: false }],
    [
      450,
      '4.1.1',
      'user unknown (try later)',
      { transient: true, bounceType: 'soft', category: 'other', suppress: false },
    ],
    [
      421,
      '4.7.0',
      'Too many connections',
      { transient: true, bounceType: 'soft', category: 'policy', suppress: false },
    ],
    [450, undefined, 'User unknown', { transient: true, bounceType: 'soft', category: 'bad_mailbox', suppress: false }],
    [550, undefined, 'Rejected', { transient: false, bounceType: 'hard', category: 'other', suppress: false }],
    [undefined, '5.1.1', '', { transient: false, bounceType: 'hard', category: 'bad_mailbox', suppress: true }],
    [
      undefined,
      undefined,
      'Connection timed out',
      { transient: true, bounceType: 'soft', category: 'other', suppress: false },
    ],
  ];

  it.each(cases)('%s %s %s', (code, enhancedCode, text, expected) => {
    expect(classifyBounce({ code, enhancedCode, text })).toMatchObject(expected);
  });

  it('does not confuse 5.1.10 with 5.1.1 or 5.1.1x', () => {
    expect(classifyBounce({ code: 550, enhancedCode: '5.1.10' }).rule).toBe('null-mx');
    expect(classifyBounce({ code: 550, enhancedCode: '5.1.11' }).rule).toBe('address');
    expect(classifyBounce({ code: 550, enhancedCode: '5.1.11' }).suppress).toBe(false);
  });

  it('ignores a malformed enhanced code', () => {
    expect(classifyBounce({ code: 550, enhancedCode: 'x.y', text: 'no such user' }).suppress).toBe(true);
  });
});

describe('retryDelayMs', () => {
  const min = 60_000;
  it('follows 1m, 5m, 15m, 30m, 1h, 2h, then 4h', () => {
    const mid = () => 0.5; // no jitter
    expect([1, 2, 3, 4, 5, 6, 7, 8, 20].map((n) => retryDelayMs(n, mid) / min)).toEqual([
      1, 5, 15, 30, 60, 120, 240, 240, 240,
    ]);
    expect(retryDelayMs(0, mid)).toBe(min);
  });

  it('jitters within +-10%', () => {
    expect(retryDelayMs(2, () => 0)).toBe(4.5 * min);
    expect(retryDelayMs(2, () => 0.999999)).toBeCloseTo(5.5 * min, -1);
    for (let i = 0; i < 100; i++) {
      const d = retryDelayMs(3);
      expect(d).toBeGreaterThanOrEqual(13.5 * min);
      expect(d).toBeLessThanOrEqual(16.5 * min);
    }
  });

  it('gives up after 72 hours from acceptance', () => {
    const accepted = 1_000_000;
    expect(nextAttemptAt(1, accepted, accepted + min, () => 0.5)).toBe(accepted + 2 * min);
    expect(nextAttemptAt(12, accepted, accepted + MAX_RETRY_AGE_MS - 60 * min, () => 0.5)).toBeNull();
    expect(MAX_RETRY_AGE_MS).toBe(72 * 3600 * 1000);
  });
});
