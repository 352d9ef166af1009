/** Bulk UUIDv7 ids for imports: valid v7 UUIDs, unique, carrying the current time. */
import { validate, version } from 'uuid';
import { describe, expect, it } from 'vitest';
import { newIds } from './batch-ids.ts';

describe('newIds', () => {
  it('makes valid, unique version-7 UUIDs stamped with the current time', () => {
    const before = Date.now();
    const ids = newIds(100_000);
    const after = Date.now();
    expect(ids).toHaveLength(100_000);
    expect(new Set(ids).size).toBe(100_000);
    for (const id of ids.slice(0, 1000)) {
      expect(validate(id), id).toBe(true);
      expect(version(id)).toBe(7);
      expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      const ms = Number.parseInt(id.replace(/-/g, '').slice(0, 12), 16);
      expect(ms).toBeGreaterThanOrEqual(before);
      expect(ms).toBeLessThanOrEqual(after);
    }
    expect(newIds(0)).toEqual([]);
  });
});
