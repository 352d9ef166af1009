import { createHash } from 'node:crypto';
import type pg from 'pg';

/**
 * PostgreSQL named prepared statements for the few hot statement texts that repeat thousands of
 * times a second: the accepts' one-statement batch (src/db/batch.ts oneStatement). Sent unnamed,
 * every batch is parsed and planned again; the server spent ~0.3 of its ~0.5 ms per batch on parse
 * and bind (log_min_duration_statement, docs/benchmarks.md "SMTP submission", session 12), and a
 * named statement is parsed once per connection and, after five runs, planned generically.
 *
 * A text opts in by starting with PREPARED (an SQL comment, so the text runs the same unnamed
 * anywhere else); the name is a hash of the text, so one text always has one name and pg's own
 * per-connection record of parsed statements (which refuses one name for two texts) holds.
 * Only texts from a small, bounded family may opt in: each connection keeps every statement it
 * prepared until it closes.
 *
 * Not for statements whose best plan depends on their parameters (a generic plan is chosen only
 * when its estimated cost is close to the custom plans', but the estimate can be wrong): the
 * accepts' INSERTs have one plan whatever the rows.
 */
export const PREPARED = '/* prepared */ ';

type Query = (...args: unknown[]) => unknown;

/** SQLSTATE invalid_sql_statement_name: the server has no statement of that name. */
const NO_SUCH_STATEMENT = '26000';

/**
 * Wraps `client.query` so that texts starting with PREPARED run as named statements (promise
 * calls, as Kysely makes them; a call with a callback is passed through unchanged).
 *
 * If the server has lost the statement while pg still counts it as parsed on this connection
 * (a `DEALLOCATE ALL` or `DISCARD ALL`, as some poolers send), the statement failed before it
 * ran: pg is told to forget it and it is sent once more with its text, so one lost statement
 * does not fail every later batch on the connection.
 */
export function namePreparedStatements(client: pg.PoolClient | pg.Client): void {
  const target = client as unknown as { query: Query; connection?: { parsedStatements?: Record<string, string> } };
  const query = target.query.bind(client) as Query;
  target.query = (text: unknown, values?: unknown, callback?: unknown) => {
    if (typeof text !== 'string' || !text.startsWith(PREPARED) || callback !== undefined) {
      return query(text, values, callback);
    }
    const name = statementName(text);
    const run = () => query({ name, text, values }) as Promise<unknown>;
    return run().catch((err: unknown) => {
      if ((err as { code?: unknown } | null)?.code !== NO_SUCH_STATEMENT) throw err;
      const parsed = target.connection?.parsedStatements;
      if (parsed) delete parsed[name];
      return run();
    });
  };
}

/** Names of the texts seen, so a batch's 2-3 kB text is not hashed again each time. */
const names = new Map<string, string>();

/** A text's statement name: 'py_' and 24 hex digits of its SHA-256 (PostgreSQL names: 63 bytes). */
export function statementName(text: string): string {
  let name = names.get(text);
  if (name === undefined) {
    name = `py_${createHash('sha256').update(text).digest('hex').slice(0, 24)}`;
    if (names.size >= 256) names.clear();
    names.set(text, name);
  }
  return name;
}
