/** Timestamps are stored and returned as fixed-width ISO-8601 UTC strings, so they sort as text on both backends. */
export function nowIso(): string {
  return new Date().toISOString();
}

export function isoAt(ms: number): string {
  return new Date(ms).toISOString();
}
