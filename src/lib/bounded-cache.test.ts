import { describe, expect, it } from 'vitest';
import { BoundedCache } from './bounded-cache.ts';

describe('BoundedCache', () => {
  it('keeps at most max entries, dropping the least recently used one, never all at once', () => {
    const cache = new BoundedCache<string, { n: number }>(3);
    cache.set('a', { n: 1 });
    cache.set('b', { n: 2 });
    cache.set('c', { n: 3 });
    expect(cache.get('a')?.n).toBe(1); // a is now the most recently used
    cache.set('d', { n: 4 });
    expect(cache.size).toBe(3);
    expect(cache.has('b')).toBe(false);
    expect([...cache.keys()].sort()).toEqual(['a', 'c', 'd']);
  });

  it('deletes and clears like a Map', () => {
    const cache = new BoundedCache<string, { n: number }>(10);
    cache.set('a', { n: 1 });
    cache.set('b', { n: 2 });
    cache.delete('a');
    expect(cache.get('a')).toBeUndefined();
    cache.clear();
    expect(cache.size).toBe(0);
  });
});
