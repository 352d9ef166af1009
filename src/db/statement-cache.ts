import type SqliteDatabase from 'better-sqlite3';

export interface StatementCacheLimits {
  /** Most statements kept. Default 1,000. */
  maxStatements?: number;
  /** Most SQL text kept, in characters, all statements together (~30 bytes of native memory per character). Default 1,000,000. */
  maxChars?: number;
  /** Statements with longer SQL are prepared on every use, never kept. Default 2,048. */
  maxStatementChars?: number;
}

/**
 * Kysely's SQLite driver prepares every query anew; preparing costs about as much as running a
 * small statement, and the hot paths (accepting mail, the delivery queue) repeat the same SQL.
 * Statements are kept by SQL text (LRU). A statement that is still being iterated (a streamed
 * query) is never handed out twice: a fresh one is prepared instead.
 *
 * Long statements are never kept, and the text kept is bounded as well as the count. A prepared
 * statement's native memory grows with its SQL (~30 bytes per character: a 300-row multi-row
 * UPDATE holds ~150 KB outside the V8 heap), and the multi-row batches (outcomes, inserts, IN
 * lists) have a different text for every row count. Kept, 600 of them held ~90 MB; evicted from
 * an LRU they had lived long enough to reach V8's old generation, where nothing frees their
 * native memory until a major GC, which V8 does not schedule for memory it cannot see: RSS
 * climbed without bound (+178 MB in 10 rounds of 600 batch sizes with a 75-statement cache).
 * Prepared for one use and dropped, they die young and their memory is reused at once.
 */
export function withStatementCache(raw: SqliteDatabase.Database, limits: StatementCacheLimits = {}) {
  const maxStatements = limits.maxStatements ?? 1000;
  const maxChars = limits.maxChars ?? 1_000_000;
  const maxStatementChars = limits.maxStatementChars ?? 2048;
  const cache = new Map<string, SqliteDatabase.Statement>();
  let chars = 0;
  const evictOldest = () => {
    const oldest = cache.keys().next().value as string;
    cache.delete(oldest);
    chars -= oldest.length;
  };
  return {
    close: () => raw.close(),
    /** What is kept now (tests, diagnostics). */
    stats: () => ({ statements: cache.size, chars }),
    prepare(text: string): SqliteDatabase.Statement {
      // Kysely opens every transaction with a deferred BEGIN. A deferred transaction that has
      // read and then writes gets SQLITE_BUSY at once, without the busy timeout, if another
      // connection holds the write lock at that moment: the checkpoint thread while it starts
      // the WAL over, or a CLI command. BEGIN IMMEDIATE takes the write lock first, waiting for it
      // under the busy timeout like any write (this connection is the process's only writer).
      const sqlText = text === 'begin' ? 'begin immediate' : text;
      const hit = cache.get(sqlText);
      if (hit && !hit.busy) {
        cache.delete(sqlText);
        cache.set(sqlText, hit);
        return hit;
      }
      const stmt = raw.prepare(sqlText);
      if (!hit && sqlText.length <= maxStatementChars) {
        while (cache.size > 0 && (cache.size >= maxStatements || chars + sqlText.length > maxChars)) evictOldest();
        cache.set(sqlText, stmt);
        chars += sqlText.length;
      }
      return stmt;
    },
  };
}
