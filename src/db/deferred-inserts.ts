import type { Executor } from './executor.ts';

/**
 * Rows that units of a group-commit batch asked to insert, held back until the batch ends and
 * then written with one multi-row INSERT per table (src/db/group-commit.ts, `runBuffered`).
 * Eight accepts in one transaction are then five INSERT statements, not forty.
 *
 * Only units that never read what they insert (the accept path) may be buffered: a row sits
 * here, invisible to SELECTs, until the flush at the end of the batch.
 */
export class InsertBuffer {
  /** Per table and column list, in the order first seen: units insert parents before children, so flushing in this order keeps foreign keys satisfied. */
  private readonly groups = new Map<string, { table: string; rows: Record<string, unknown>[] }>();

  add(table: string, rows: readonly object[]): void {
    if (rows.length === 0) return;
    const key = `${table}|${Object.keys(rows[0] as object).join(',')}`;
    let g = this.groups.get(key);
    if (!g) {
      g = { table, rows: [] };
      this.groups.set(key, g);
    }
    for (const r of rows) g.rows.push(r as Record<string, unknown>);
  }

  /** Takes every held group out of the buffer, in flush order. */
  drain(): { table: string; rows: Record<string, unknown>[] }[] {
    const out = [...this.groups.values()];
    this.groups.clear();
    return out;
  }
}

const buffers = new WeakMap<object, InsertBuffer>();

/** While set, insertMany on `trx` appends to `buffer` instead of running a statement. */
export function bufferInserts(trx: Executor, buffer: InsertBuffer | undefined): void {
  if (buffer) buffers.set(trx, buffer);
  else buffers.delete(trx);
}

export function insertBufferOf(db: Executor): InsertBuffer | undefined {
  return buffers.get(db);
}
