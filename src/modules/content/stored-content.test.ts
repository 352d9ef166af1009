import { describe, expect, it } from 'vitest';
import { isReservedHeader } from './stored-content.ts';

describe('isReservedHeader', () => {
  it('refuses structural and malformed names', () => {
    expect(isReservedHeader('content-type')).toBe(true);
    expect(isReservedHeader('Message-ID')).toBe(true);
    expect(isReservedHeader('X-Ok')).toBe(false);
    expect(isReservedHeader('X:Bad')).toBe(true);
    expect(isReservedHeader('')).toBe(true);
  });
});
