import type { Executor } from '../db/executor.ts';
import type { DB } from '../db/schema.ts';
import { isUniqueViolation } from '../db/unique-violation.ts';
import { AppError } from '../lib/errors.ts';
import { type CursorCodec, type Page, toPage } from '../lib/pagination.ts';

/**
 * What IP pools and warmup policies (and any later resource of the same shape) share: a
 * tenant's rows with a UUIDv7 id and a name unique per tenant, listed newest first. One copy, so
 * the cursor and the 409 name_taken answer cannot drift apart between resources.
 */

/** Tables whose rows belong to a tenant and carry an id and a name. */
type NamedTable = {
  [K in keyof DB]: DB[K] extends { tenant_id: string; id: string; name: string } ? K : never;
}[keyof DB];

/** 409 name_taken on the `name` field; `what` is the resource with its article ("an IP pool"). */
export function nameTaken(what: string): AppError {
  return new AppError('name_taken', `${what} with this name already exists`, { field: 'name' });
}

/**
 * Runs an insert or update of a named row, answering name_taken when the tenant's unique name
 * index refuses it: the look-up before a write cannot see a concurrent create of the same name.
 */
export async function writeNamed<T>(what: string, write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (err) {
    if (isUniqueViolation(err)) throw nameTaken(what);
    throw err;
  }
}

/**
 * One page of a tenant's rows, newest first (ids are time-ordered). The cursor holds the last
 * id of the page before; `map` turns rows into views.
 */
export async function newestFirstPage<T extends NamedTable, V>(
  db: Executor,
  table: T,
  tenantId: string,
  page: { limit: number; cursor?: string | undefined; cursors: CursorCodec },
  map: (row: DB[T]) => V,
): Promise<Page<V>> {
  const beforeId = page.cursor ? page.cursors.decode(page.cursor).id : undefined;
  // Kysely cannot type a query over a table named by a type parameter; the union of the named
  // tables has the columns used here, and the rows are the table's own.
  let q = db
    .selectFrom(table as NamedTable)
    .selectAll()
    .where('tenant_id', '=', tenantId);
  if (beforeId) q = q.where('id', '<', beforeId);
  const rows = (await q
    .orderBy('id', 'desc')
    .limit(page.limit + 1)
    .execute()) as DB[T][];
  return toPage(rows, page.limit, page.cursors, map);
}
