/**
 * Database failures that are the database's state, not a bug in the request: the HTTP API answers
 * them `503 unavailable` or `507 insufficient_storage` with Retry-After and SMTP submission a
 * temporary 451 / 452, so clients and load balancers retry instead of reporting a 500
 * (docs/operations.md "When the database fails"). Counted in postyard_database_faults_total.
 *
 * - `unavailable`: the database cannot be reached or dropped the connection: a refused, reset or
 *   timed-out socket, PostgreSQL's connection exceptions (SQLSTATE class 08), an administrator or
 *   crash shutdown or a server still starting (57P01-57P03), too many connections (53300), pg's
 *   own "Connection terminated" errors and its pool's connect timeout; on SQLite a lock held past
 *   busy_timeout (SQLITE_BUSY, SQLITE_LOCKED) or a file that cannot be opened.
 * - `storage_full`: no room to write: SQLite's SQLITE_FULL (a full disk, or max_page_count) and
 *   PostgreSQL's disk_full (53100).
 */
export type DatabaseFault = 'unavailable' | 'storage_full';

export const DATABASE_FAULTS: readonly DatabaseFault[] = ['unavailable', 'storage_full'];

const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENETDOWN',
  'EHOSTDOWN',
  'ENOTFOUND',
  'EAI_AGAIN',
]);

/** PostgreSQL SQLSTATEs (class 08 is matched as a class). */
const PG_UNAVAILABLE = new Set(['57P01', '57P02', '57P03', '53300']);
const PG_STORAGE_FULL = new Set(['53100']);

/** pg and pg-pool errors that carry no code. */
const PG_CONNECTION_MESSAGES = [
  /^Connection terminated/,
  /^Client has encountered a connection error and is not queryable/,
  /^timeout exceeded when trying to connect/,
  /^Client was closed and is not queryable/,
];

/**
 * Errors the PostgreSQL pool and its connections raised (openPostgres marks them): a socket error
 * such as ECONNREFUSED means the database only when it came from there, not from a webhook URL or
 * a DNS lookup a request made. SQLSTATEs and SQLITE_ codes speak for themselves.
 */
const fromDatabase = new WeakSet<object>();

/** Marks `err` as raised by the database driver; returns it. */
export function markDatabaseError(err: unknown): unknown {
  if (err !== null && typeof err === 'object') fromDatabase.add(err);
  return err;
}

/** The fault `err` (or an error it wraps: `cause`, AggregateError) stands for, or null. */
export function databaseFault(err: unknown): DatabaseFault | null {
  const seen = new Set<unknown>();
  const queue: [unknown, boolean][] = [[err, false]];
  while (queue.length > 0 && seen.size < 16) {
    const [e, marked] = queue.shift() as [unknown, boolean];
    if (e === null || typeof e !== 'object' || seen.has(e)) continue;
    seen.add(e);
    const driver = marked || fromDatabase.has(e);
    const fault = faultOf(e as { code?: unknown; message?: unknown }, driver);
    if (fault) return fault;
    const { cause, errors } = e as { cause?: unknown; errors?: unknown };
    if (cause !== undefined) queue.push([cause, driver]);
    if (Array.isArray(errors)) for (const x of errors) queue.push([x, driver]);
  }
  return null;
}

function faultOf(e: { code?: unknown; message?: unknown }, fromDriver: boolean): DatabaseFault | null {
  const code = typeof e.code === 'string' ? e.code : '';
  if (code.startsWith('SQLITE_')) {
    if (code === 'SQLITE_FULL') return 'storage_full';
    if (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED') || code.startsWith('SQLITE_CANTOPEN'))
      return 'unavailable';
    return null;
  }
  if (PG_STORAGE_FULL.has(code)) return 'storage_full';
  if (PG_UNAVAILABLE.has(code) || /^08[0-9A-Z]{3}$/.test(code)) return 'unavailable';
  if (!fromDriver) return null;
  if (NETWORK_CODES.has(code)) return 'unavailable';
  const message = typeof e.message === 'string' ? e.message : '';
  if (PG_CONNECTION_MESSAGES.some((re) => re.test(message))) return 'unavailable';
  return null;
}
