/** The fan-out event JSON cache (src/modules/webhooks/event-cache.ts): bounded, taken once per webhook. */
import { describe, expect, it } from 'vitest';
import { EventBodyCache } from './event-cache.ts';

describe('EventBodyCache', () => {
  it('hands an entry to each webhook it was routed to, then forgets it', () => {
    const c = new EventBodyCache(1000, 60_000);
    c.add('e1', '{"id":"e1"}', 2, 0);
    expect(c.take('e1')).toBe('{"id":"e1"}');
    expect(c.take('e1')).toBe('{"id":"e1"}');
    expect(c.take('e1')).toBeUndefined();
    expect(c.size).toBe(0);
  });

  it('keeps nothing new when full (the older entries are the next to be delivered)', () => {
    const c = new EventBodyCache(20, 60_000);
    c.add('a', 'x'.repeat(8), 1, 0);
    expect(c.roomy).toBe(true);
    c.add('b', 'y'.repeat(8), 1, 0);
    expect(c.roomy).toBe(false);
    c.add('c', 'z'.repeat(8), 1, 0);
    expect([c.take('a'), c.take('b'), c.take('c')]).toEqual(['xxxxxxxx', 'yyyyyyyy', undefined]);
    expect(c.roomy).toBe(true);
    c.add('c', 'z'.repeat(8), 1, 0);
    expect(c.take('c')).toBe('zzzzzzzz');
  });

  it('drops entries nobody took after ttlMs (a paused or dead endpoint holds no memory)', () => {
    const c = new EventBodyCache(1000, 100);
    c.add('old', '1', 1, 0);
    c.add('new', '2', 1, 80);
    c.sweep(150);
    expect(c.take('old')).toBeUndefined();
    expect(c.take('new')).toBe('2');
  });
});
