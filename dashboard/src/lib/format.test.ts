import { describe, expect, it } from 'vitest';
import { bucketLabel, eventSummary, formatPercent, formatTime, labelEvery, niceTicks, relativeTime } from './format.ts';

describe('dashboard formatting', () => {
  it('formats percentages and missing rates', () => {
    expect(formatPercent(null)).toBe('–');
    expect(formatPercent(1)).toBe('100%');
    expect(formatPercent(0.9876)).toBe('98.8%');
    expect(formatPercent(0)).toBe('0%');
  });

  it('formats times in UTC and relative to now', () => {
    expect(formatTime('2026-11-22T10:04:05.123Z')).toBe('2026-11-22 10:04:05 UTC');
    expect(formatTime(null)).toBe('–');
    const now = Date.parse('2026-11-22T10:00:00Z');
    expect(relativeTime('2026-11-22T09:57:00Z', now)).toBe('3 minutes ago');
    expect(relativeTime('2026-11-22T12:00:00Z', now)).toBe('in 2 hours');
    expect(relativeTime('2026-11-22T09:59:50Z', now)).toBe('just now');
    expect(relativeTime(null, now)).toBe('never');
  });

  it('labels buckets', () => {
    expect(bucketLabel('2026-11-22T07:00:00.000Z', 'hour')).toBe('07:00');
    expect(bucketLabel('2026-11-22T00:00:00.000Z', 'day')).toBe('Nov 22');
  });

  it('makes round axis ticks that cover the maximum', () => {
    expect(niceTicks(0)).toEqual([0, 1]);
    expect(niceTicks(3)).toEqual([0, 1, 2, 3]);
    expect(niceTicks(10)).toEqual([0, 5, 10]);
    expect(niceTicks(40)).toEqual([0, 10, 20, 30, 40]);
    const t = niceTicks(987);
    expect(t[0]).toBe(0);
    expect(t.at(-1)).toBeGreaterThanOrEqual(987);
    expect(t.length).toBeLessThanOrEqual(6);
    expect(labelEvery(30, 8)).toBe(4);
    expect(labelEvery(7, 8)).toBe(1);
  });

  it('summarizes event data', () => {
    expect(eventSummary('message.delivered', { mx_host: 'mx.example.com', smtp_response: '250 ok' })).toBe(
      'mx.example.com: 250 ok',
    );
    expect(
      eventSummary('message.bounced', {
        bounce_type: 'hard',
        smtp_code: 550,
        enhanced_code: '5.1.1',
        diagnostic: 'no such user',
      }),
    ).toBe('hard 550 5.1.1 no such user');
    expect(eventSummary('message.accepted', {})).toBe('');
  });
});
