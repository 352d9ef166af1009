/** Pure formatting and chart helpers (unit-tested in format.test.ts). */

export function formatNumber(n: number): string {
  return new Intl.NumberFormat('en-US').format(n);
}

export function formatPercent(fraction: number | null): string {
  if (fraction === null || !Number.isFinite(fraction)) return '–';
  const pct = fraction * 100;
  return `${pct >= 99.95 || pct === 0 ? pct.toFixed(0) : pct.toFixed(1)}%`;
}

/** "2026-11-22 10:04:05 UTC": unambiguous, the same for every viewer. */
export function formatTime(iso: string | null | undefined): string {
  if (!iso) return '–';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  return `${d.toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}

/** "3 minutes ago", "in 2 hours", "just now". */
export function relativeTime(iso: string | null | undefined, now = Date.now()): string {
  if (!iso) return 'never';
  const diff = Date.parse(iso) - now;
  if (Number.isNaN(diff)) return iso;
  const abs = Math.abs(diff);
  if (abs < 45_000) return 'just now';
  const units: [number, string][] = [
    [86_400_000 * 365, 'year'],
    [86_400_000 * 30, 'month'],
    [86_400_000, 'day'],
    [3_600_000, 'hour'],
    [60_000, 'minute'],
  ];
  for (const [ms, name] of units) {
    if (abs >= ms) {
      const n = Math.round(abs / ms);
      const label = `${n} ${name}${n === 1 ? '' : 's'}`;
      return diff < 0 ? `${label} ago` : `in ${label}`;
    }
  }
  return 'just now';
}

/** Bucket label for the chart axis: "10:00" for hours, "Nov 22" for days (UTC). */
export function bucketLabel(iso: string, bucket: 'hour' | 'day'): string {
  const d = new Date(iso);
  if (bucket === 'hour') return `${String(d.getUTCHours()).padStart(2, '0')}:00`;
  return d.toLocaleDateString('en-US', { month: 'short', day: 'numeric', timeZone: 'UTC' });
}

/** Round axis maximum and evenly spaced ticks (0 included) for counts up to `max`. */
export function niceTicks(max: number, count = 4): number[] {
  if (!(max > 0)) return [0, 1];
  const raw = max / count;
  const mag = 10 ** Math.floor(Math.log10(raw));
  // Counts are integers: steps of 1, 2 or 5 times a power of ten, never below 1.
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw) ?? 10 * mag;
  const stepInt = Math.max(1, Math.round(step));
  const top = Math.ceil(max / stepInt) * stepInt;
  const ticks: number[] = [];
  for (let v = 0; v <= top; v += stepInt) ticks.push(v);
  return ticks;
}

/** Which labels to print on an axis of `n` buckets so at most `max` show. */
export function labelEvery(n: number, max: number): number {
  return Math.max(1, Math.ceil(n / max));
}

export function truncate(s: string, max: number): string {
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
}

/** One line about an event's data for the activity list. */
export function eventSummary(type: string, data: Record<string, unknown>): string {
  const str = (k: string) => (typeof data[k] === 'string' || typeof data[k] === 'number' ? String(data[k]) : '');
  switch (type) {
    case 'message.delivered':
      return [str('mx_host'), str('smtp_response')].filter(Boolean).join(': ');
    case 'message.deferred':
    case 'message.bounced':
      return [str('bounce_type'), str('smtp_code'), str('enhanced_code'), str('diagnostic')].filter(Boolean).join(' ');
    case 'message.failed':
      return str('reason');
    case 'message.suppressed':
      return str('reason_category');
    case 'message.complained':
      return str('feedback_type');
    case 'message.clicked':
      return str('url');
    case 'message.unsubscribed':
      return str('method');
    default:
      return '';
  }
}
