import type { MessagesTable } from '../../db/schema.ts';

/**
 * Message rows read back from SQLite as one JSON array each, for the fair claim (queue.sql.ts
 * TAKE_FAIR, run by src/modules/delivery/fair-claim.ts).
 *
 * better-sqlite3 makes one JavaScript value per column of every row it returns: for a claim's
 * 200 rows of 18 columns, 3,600 strings and numbers made one by one, which measured ~1.5 ms of a
 * ~5 ms claim (`returning *` against `returning id`, docs/benchmarks.md "Session 13"). SQLite's
 * json_array() writes each row as one string and a single JSON.parse per row turns it back into
 * the same values: text stays text, integers stay numbers, NULL stays null.
 *
 * Every column of the table is listed, so a claimed row is the whole MessagesTable row as
 * `returning *` gave it; the type check below fails the build if a column is added to the schema
 * and not here (and test/pacing/fair-claim.test.ts compares a claimed row with `select *`).
 */
export const MESSAGE_COLUMNS = [
  'tenant_id',
  'id',
  'transmission_id',
  'recipient',
  'recipient_name',
  'recipient_domain',
  'substitution_data',
  'metadata',
  'state',
  'attempt_count',
  'next_attempt_at',
  'locked_until',
  'locked_by',
  'last_response',
  'created_at',
  'updated_at',
  'source_address',
  'priority',
  'recipient_role',
] as const satisfies readonly (keyof MessagesTable)[];

type Unlisted = Exclude<keyof MessagesTable, (typeof MESSAGE_COLUMNS)[number]>;
/** Compile-time: every column of MessagesTable is in MESSAGE_COLUMNS. */
const everyColumnListed: [Unlisted] extends [never] ? true : Unlisted = true;
void everyColumnListed;

/** The select-list item that packs a message row: `json_array(tenant_id, id, ...) as packed`. */
export const PACKED_MESSAGE_SQL = `json_array(${MESSAGE_COLUMNS.join(', ')}) as packed`;

/**
 * Rows of a statement that may pack them (the SQLite text of TAKE_FAIR selects PACKED_MESSAGE_SQL,
 * the PostgreSQL text the columns): packed rows back to MessagesTable objects, others as they are.
 * The statement decides, so the caller never asks which database runs.
 */
export function messageRows(rows: readonly (MessagesTable | { packed: string })[]): MessagesTable[] {
  const first = rows[0];
  if (first === undefined || !('packed' in first)) return rows as MessagesTable[];
  return unpackMessages(rows as { packed: string }[]);
}

/** Rows selected with PACKED_MESSAGE_SQL back to MessagesTable objects. */
export function unpackMessages(rows: readonly { packed: string }[]): MessagesTable[] {
  return rows.map(({ packed }) => {
    const values = JSON.parse(packed) as unknown[];
    const row: Record<string, unknown> = {};
    for (let i = 0; i < MESSAGE_COLUMNS.length; i++) row[MESSAGE_COLUMNS[i] as string] = values[i];
    return row as unknown as MessagesTable;
  });
}
