import { type Kysely, sql } from 'kysely';

/**
 * Email suppression identifiers become lower-case as a whole (`Ann@x.test` and
 * `ann@x.test` are one address for de-duplication, so they must be one for suppression too;
 * normalizeEmail in src/lib/email.ts). Rows stored before kept the local part's case.
 *
 * Case variants of one address collapse into one row (the unique index is tenant + type +
 * identifier): the most recently updated row is kept (the latest decision about the address,
 * as an upsert would have left it; ties: the larger id), the others are deleted. Domain
 * identifiers were always lower-cased. Only the rows that are not lower-case yet are read (one
 * scan); each of their addresses then costs a lookup on the unique index, a delete and an update.
 * Identifiers are ASCII (isValidEmail), so SQL lower() and toLowerCase() agree. Running it again
 * changes nothing.
 */
interface Row {
  id: string;
  tenant_id: string;
  identifier: string;
  updated_at: string;
}

// biome-ignore lint/suspicious/noExplicitAny: migrations are frozen and typed against no schema
export async function up(db: Kysely<any>): Promise<void> {
  const { rows } = await sql<Row>`
    select id, tenant_id, identifier, updated_at from suppressions
    where type = 'email' and identifier <> lower(identifier)`.execute(db);
  const groups = new Map<string, Row[]>();
  for (const r of rows) {
    const key = `${r.tenant_id}\u0000${r.identifier.toLowerCase()}`;
    const list = groups.get(key);
    if (list) list.push(r);
    else groups.set(key, [r]);
  }
  for (const variants of groups.values()) {
    const first = variants[0] as Row;
    const lower = first.identifier.toLowerCase();
    const existing = await db
      .selectFrom('suppressions')
      .select(['id', 'tenant_id', 'identifier', 'updated_at'])
      .where('tenant_id', '=', first.tenant_id)
      .where('type', '=', 'email')
      .where('identifier', '=', lower)
      .executeTakeFirst();
    const all: Row[] = existing ? [...variants, existing as Row] : variants;
    all.sort((a, b) => (a.updated_at === b.updated_at ? (a.id < b.id ? 1 : -1) : a.updated_at < b.updated_at ? 1 : -1));
    const [keep, ...drop] = all as [Row, ...Row[]];
    if (drop.length) {
      await db
        .deleteFrom('suppressions')
        .where(
          'id',
          'in',
          drop.map((r) => r.id),
        )
        .execute();
    }
    if (keep.identifier !== lower) {
      await db.updateTable('suppressions').set({ identifier: lower }).where('id', '=', keep.id).execute();
    }
  }
}

/** The original case is not kept anywhere: nothing to restore. */
export async function down(): Promise<void> {}
