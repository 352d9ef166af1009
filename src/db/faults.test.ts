import { describe, expect, it } from 'vitest';
import { databaseFault, markDatabaseError } from './faults.ts';

/** Which database failures are the database's state (503 / 507), not a bug (500): faults.ts. */
const coded = (code: string, message = 'x') => Object.assign(new Error(message), { code });

describe('databaseFault', () => {
  it('PostgreSQL: connection exceptions, shutdowns and too many connections are unavailable; disk_full is storage', () => {
    for (const code of ['08000', '08003', '08006', '08001', '08004', '57P01', '57P02', '57P03', '53300'])
      expect(databaseFault(coded(code)), code).toBe('unavailable');
    expect(databaseFault(coded('53100'))).toBe('storage_full');
    // A constraint violation, a syntax error, a serialization failure: the request's own doing.
    for (const code of ['23505', '42601', '40001', '22P02']) expect(databaseFault(coded(code)), code).toBeNull();
  });

  it('SQLite: SQLITE_FULL is storage; a lock held past busy_timeout or a file that will not open is unavailable', () => {
    expect(databaseFault(coded('SQLITE_FULL', 'database or disk is full'))).toBe('storage_full');
    for (const code of ['SQLITE_BUSY', 'SQLITE_BUSY_SNAPSHOT', 'SQLITE_LOCKED', 'SQLITE_CANTOPEN'])
      expect(databaseFault(coded(code)), code).toBe('unavailable');
    for (const code of ['SQLITE_CONSTRAINT_UNIQUE', 'SQLITE_ERROR']) expect(databaseFault(coded(code))).toBeNull();
  });

  it("socket errors and pg's own connection errors count only when the database driver raised them", () => {
    for (const err of [
      coded('ECONNREFUSED', 'connect ECONNREFUSED 127.0.0.1:5432'),
      coded('ECONNRESET'),
      coded('ETIMEDOUT'),
      new Error('Connection terminated unexpectedly'),
      new Error('timeout exceeded when trying to connect'),
    ]) {
      // The same code from a webhook URL or a DNS lookup is not the database's.
      expect(databaseFault(err), err.message).toBeNull();
      expect(databaseFault(markDatabaseError(err)), err.message).toBe('unavailable');
    }
  });

  it('looks through causes and AggregateErrors (a batch that failed, both addresses of a host refused)', () => {
    const refused = markDatabaseError(new AggregateError([coded('ECONNREFUSED'), coded('ECONNREFUSED')], 'connect'));
    expect(databaseFault(refused)).toBe('unavailable');
    expect(databaseFault(new Error('commit failed', { cause: coded('SQLITE_FULL') }))).toBe('storage_full');
    expect(databaseFault(new Error('plain bug'))).toBeNull();
    expect(databaseFault('a string')).toBeNull();
    const loop: { cause?: unknown } = new Error('loop');
    loop.cause = loop;
    expect(databaseFault(loop)).toBeNull();
  });
});
