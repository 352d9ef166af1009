import { describe, expect, it } from 'vitest';
import { wantsPrettyLogs } from './logger.ts';

describe('wantsPrettyLogs', () => {
  it('auto: readable on a terminal, JSON otherwise; json and pretty force their format', () => {
    expect(wantsPrettyLogs('auto', true)).toBe(true);
    expect(wantsPrettyLogs('auto', false)).toBe(false);
    expect(wantsPrettyLogs('json', true)).toBe(false);
    expect(wantsPrettyLogs('pretty', false)).toBe(true);
  });
});
