/** Timestamps are stored and returned as fixed-width ISO-8601 UTC strings, so they sort as text on both backends. */
export function nowIso(): string {
  return new Date().toISOString();
}

export function isoAt(ms: number): string {
  return new Date(ms).toISOString();
}

/**
 * Where time comes from for code whose behaviour depends on the calendar (warmup days and hours,
 * docs/ip-pools.md): injected, so a test can move a day ahead without waiting for it.
 */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };
