import { coalesced, type Guard } from '../../db/coalesce.ts';
import { dialectSql, runSql, shapedSql } from '../../db/dialect.ts';
import { bindsArrays } from '../../db/tuning.ts';
import type { Executor } from '../../db/executor.ts';
import type { SuppressionsTable } from '../../db/schema.ts';
import { newIds } from './batch-ids.ts';
import { wellFormed } from '../../lib/well-formed.ts';

/**
 * Rows per upsert statement (one JSON parameter each, see below). 400 rows make a ~70 KB string,
 * under V8's large-object threshold (~128 KB): larger strings go straight to old space and are
 * only freed by a major GC, which added ~100 MB of peak RSS over a 1M-row import at 1,000 rows.
 */
const ROWS_PER_STATEMENT = 400;
/** Values per IN (...) list. */
const IN_CHUNK = 1000;

function chunks<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

/**
 * One suppression to write, encoded as the JSON text `[identifier, type, reason_category,
 * description, source, scope]`. Writers hold batches as these strings rather than objects: one compact
 * allocation per row, appended to the statement's JSON parameter as is.
 */
export function encodeSuppression(
  identifier: string,
  type: string,
  reasonCategory: string,
  description: string | null,
  source: string,
  scope: string,
): string {
  // Lone surrogates in the free text would make the JSON parameter unparsable for PostgreSQL.
  return JSON.stringify([
    identifier,
    type,
    reasonCategory,
    description === null ? null : wellFormed(description),
    source,
    scope,
  ]);
}

/**
 * Upserts encoded suppressions (one tenant; at most one per type+identifier, which PostgreSQL's
 * ON CONFLICT requires within one statement). New rows get a fresh UUIDv7 and created_at =
 * updated_at = `now`; an existing row keeps its id and created_at and takes the new
 * reason_category, description, source and updated_at, unless nothing would change (then it is
 * left alone, so updated_at keeps telling when the entry last changed). Rows go in sorted
 * (the encoding starts with identifier then type, so this is an order by identity) so concurrent
 * imports lock rows in the same order and cannot deadlock each other.
 *
 * Returns how many rows were created (the rest matched existing ones, changed or not): RETURNING
 * gives back the id we generated only for an inserted row, the existing id for an updated one.
 */
export async function upsertSuppressions(
  db: Executor,
  tenantId: string,
  encoded: readonly string[],
  now: string,
  opts: { count: boolean } = { count: true },
): Promise<number> {
  const sorted = [...encoded].sort();
  const upsert = opts.count ? UPSERT_RETURNING : UPSERT;
  const nowJson = JSON.stringify(now);
  let created = 0;
  for (const chunk of chunks(sorted, ROWS_PER_STATEMENT)) {
    const ids = newIds(chunk.length);
    // Each element: [id, now, identifier, type, reason_category, description, source, scope].
    let payload = '[';
    for (let i = 0; i < chunk.length; i++) {
      payload += `${i ? ',' : ''}["${ids[i]}",${nowJson},${(chunk[i] ?? '[]').slice(1)}`;
    }
    payload += ']';
    const returned = await runSql<{ id: string }>(db, upsert, [tenantId, payload]);
    if (!opts.count) continue;
    const mine = new Set(ids);
    for (const r of returned) if (mine.has(r.id)) created++;
  }
  return created;
}

/*
 * Both backends get a statement's rows as a single JSON parameter, so the statement text is the
 * same for every batch: no per-value bind parameters (SQLite allows 32,766), no large one-off
 * statement for SQLite to compile, and no JS-side serialization of one array per column (pg).
 * On PostgreSQL jsonb, not json: parsed once, where json re-scans the element for every ->>
 * (~40% faster in a direct test). `where true` is SQLite's documented way to let ON CONFLICT
 * follow INSERT ... SELECT.
 */
function upsertSql(returning: string) {
  const update =
    'reason_category = excluded.reason_category, description = excluded.description, ' +
    'source = excluded.source, scope = excluded.scope, updated_at = excluded.updated_at';
  const columns =
    '(tenant_id, id, identifier, type, reason_category, description, source, scope, created_at, updated_at)';
  return dialectSql({
    sqlite:
      `insert into suppressions ${columns} ` +
      'select ?, j.value ->> 0, j.value ->> 2, j.value ->> 3, j.value ->> 4, j.value ->> 5, j.value ->> 6, j.value ->> 7, j.value ->> 1, j.value ->> 1 ' +
      'from json_each(?) as j where true ' +
      `on conflict (tenant_id, type, identifier) do update set ${update} ` +
      'where suppressions.reason_category is not excluded.reason_category ' +
      'or suppressions.description is not excluded.description or suppressions.source is not excluded.source ' +
      'or suppressions.scope is not excluded.scope' +
      returning,
    postgres:
      `insert into suppressions ${columns} ` +
      'select $1, j ->> 0, j ->> 2, j ->> 3, j ->> 4, j ->> 5, j ->> 6, j ->> 7, j ->> 1, j ->> 1 ' +
      'from jsonb_array_elements($2::jsonb) as j ' +
      `on conflict (tenant_id, type, identifier) do update set ${update} ` +
      'where (suppressions.reason_category, suppressions.description, suppressions.source, suppressions.scope) ' +
      'is distinct from (excluded.reason_category, excluded.description, excluded.source, excluded.scope)' +
      returning,
  });
}
/** [tenantId, payload] */
const UPSERT = upsertSql('');
const UPSERT_RETURNING = upsertSql(' returning id');

export async function getSuppression(
  db: Executor,
  tenantId: string,
  id: string,
): Promise<SuppressionsTable | undefined> {
  return db
    .selectFrom('suppressions')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .executeTakeFirst();
}

export async function findSuppressionByIdentity(
  db: Executor,
  tenantId: string,
  type: string,
  identifier: string,
): Promise<SuppressionsTable | undefined> {
  return db
    .selectFrom('suppressions')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('type', '=', type)
    .where('identifier', '=', identifier)
    .executeTakeFirst();
}

/** Hard delete: a suppression has no history worth keeping once lifted. False if absent. */
export async function deleteSuppression(db: Executor, tenantId: string, id: string): Promise<boolean> {
  const res = await db
    .deleteFrom('suppressions')
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .executeTakeFirst();
  return Number(res.numDeletedRows) > 0;
}

/** Rows of one type whose identifier is in `identifiers` (chunked IN lists on the unique index). */
export async function findByIdentifiers(
  db: Executor,
  tenantId: string,
  type: string,
  identifiers: readonly string[],
): Promise<Pick<SuppressionsTable, 'id' | 'identifier' | 'reason_category' | 'scope'>[]> {
  type Row = Pick<SuppressionsTable, 'id' | 'identifier' | 'reason_category' | 'scope'>;
  const out: Row[] = [];
  for (const chunk of chunks(identifiers, IN_CHUNK)) {
    // Asked on every accept: written as SQL text (cached per size) rather than built by Kysely
    // each time, see src/db/dialect.ts for why.
    out.push(...(await runSql<Row>(db, findSql(db, chunk.length), [tenantId, type, ...chunk])));
  }
  return out;
}

const findSql = shapedSql(1000, (param, _dialect, n: number) => {
  const list = Array.from({ length: n }, (_, i) => param(i + 3)).join(', ');
  return `select "id", "identifier", "reason_category", "scope" from "suppressions" where "tenant_id" = ${param(1)} and "type" = ${param(2)} and "identifier" in (${list})`;
});

type Match = Pick<SuppressionsTable, 'id' | 'identifier' | 'reason_category' | 'scope'>;

/**
 * The accept-time lookup: email rows among `emails` and domain rows among `domains`, in one
 * statement (two index ranges, UNION ALL) when both lists fit one chunk: on PostgreSQL every
 * statement of an accept is a round trip its batch waits for.
 */
export function findEmailsAndDomains(
  db: Executor,
  tenantId: string,
  emails: readonly string[],
  domains: readonly string[],
): Promise<{ emailRows: Match[]; domainRows: Match[] }> {
  // The accepts of a PostgreSQL batch ask together: one statement per tenant for all of them.
  // In a speculative PostgreSQL batch (src/db/coalesce.ts Guard) it asks nothing: "no rows" is
  // assumed and checked by the statement that writes the batch.
  return coalesced(
    db,
    'suppressions.findEmailsAndDomains',
    { tenantId, emails, domains },
    (items) => findForMany(db, items),
    NOTHING_SUPPRESSED,
  );
}

type Found = { emailRows: Match[]; domainRows: Match[] };

/** Lookups of up to this many addresses are assumed to find nothing in a speculative batch. */
const GUESS_MAX_RECIPIENTS = 50;
type CheckedRow = Match & { tenant_id: string; type: string };

const keyOf = (tenantId: string, type: string, identifier: string) => `${tenantId}\u0000${type}\u0000${identifier}`;

/** The keys (tenant, type, identifier) of lookups, once per array of them. */
const keysOf = new WeakMap<readonly Lookup[], Set<string>>();
function checkedKeys(items: readonly Lookup[]): Set<string> {
  let keys = keysOf.get(items);
  if (!keys) {
    keys = new Set();
    for (const it of items) {
      for (const e of it.emails) keys.add(keyOf(it.tenantId, 'email', e));
      for (const d of it.domains) keys.add(keyOf(it.tenantId, 'domain', d));
    }
    keysOf.set(items, keys);
  }
  return keys;
}

/**
 * The accept-time lookup's guard: assume no suppression row; the check finds every row of the
 * batch's (tenant, type, identifier) keys on the unique index, whatever its scope (a row that
 * the scope then leaves out only costs the re-run), so the re-run sees what findForMany would.
 */
const NOTHING_SUPPRESSED: Guard<Lookup, Found> = {
  // A big transmission is asked for as before: a suppression among its thousands of recipients
  // is likely, and a failed guess would have sent all its rows for nothing; its one round trip
  // is small next to its own work.
  assume: (item) => (item.emails.length <= GUESS_MAX_RECIPIENTS ? { emailRows: [], domainRows: [] } : undefined),
  sql: (first) =>
    `select s."tenant_id", s."type", s."identifier", s."id", s."reason_category", s."scope" ` +
    `from unnest($${first}::text[], $${first + 1}::text[], $${first + 2}::text[]) as k("tenant_id", "type", "identifier") ` +
    `join "suppressions" s on s."tenant_id" = k."tenant_id" and s."type" = k."type" and s."identifier" = k."identifier"`,
  params: (items) => {
    const tenants: string[] = [];
    const types: string[] = [];
    const identifiers: string[] = [];
    for (const key of checkedKeys(items)) {
      const [t, ty, id] = key.split('\u0000') as [string, string, string];
      tenants.push(t);
      types.push(ty);
      identifiers.push(id);
    }
    return [tenants, types, identifiers];
  },
  answer: (item, checked, rows) => {
    const keys = checkedKeys(checked);
    for (const e of item.emails) if (!keys.has(keyOf(item.tenantId, 'email', e))) return undefined;
    for (const d of item.domains) if (!keys.has(keyOf(item.tenantId, 'domain', d))) return undefined;
    const emails = new Set(item.emails);
    const domains = new Set(item.domains);
    const found: Found = { emailRows: [], domainRows: [] };
    for (const r of rows as CheckedRow[]) {
      if (r.tenant_id !== item.tenantId) continue;
      const m: Match = { id: r.id, identifier: r.identifier, reason_category: r.reason_category, scope: r.scope };
      if (r.type === 'email' && emails.has(r.identifier)) found.emailRows.push(m);
      else if (r.type === 'domain' && domains.has(r.identifier)) found.domainRows.push(m);
    }
    return found;
  },
};

interface Lookup {
  tenantId: string;
  emails: readonly string[];
  domains: readonly string[];
}

/** Each item's rows, from one lookup per tenant of the union of the items' addresses and domains. */
async function findForMany(db: Executor, items: Lookup[]): Promise<{ emailRows: Match[]; domainRows: Match[] }[]> {
  if (items.length === 1) {
    const only = items[0] as Lookup;
    return [await findNow(db, only.tenantId, only.emails, only.domains)];
  }
  const union = new Map<string, { emails: Set<string>; domains: Set<string> }>();
  for (const it of items) {
    let u = union.get(it.tenantId);
    if (!u) {
      u = { emails: new Set(), domains: new Set() };
      union.set(it.tenantId, u);
    }
    for (const e of it.emails) u.emails.add(e);
    for (const d of it.domains) u.domains.add(d);
  }
  const rows = new Map<string, { emailRows: Match[]; domainRows: Match[] }>();
  for (const [tenantId, u] of union) rows.set(tenantId, await findNow(db, tenantId, [...u.emails], [...u.domains]));
  return items.map((it) => {
    const r = rows.get(it.tenantId) as { emailRows: Match[]; domainRows: Match[] };
    const emails = new Set(it.emails);
    const domains = new Set(it.domains);
    return {
      emailRows: r.emailRows.filter((m) => emails.has(m.identifier)),
      domainRows: r.domainRows.filter((m) => domains.has(m.identifier)),
    };
  });
}

async function findNow(
  db: Executor,
  tenantId: string,
  emails: readonly string[],
  domains: readonly string[],
): Promise<{ emailRows: Match[]; domainRows: Match[] }> {
  if (bindsArrays(db) && emails.length > 0 && domains.length > 0) {
    // PostgreSQL: the addresses and domains as two array parameters, one statement whatever their
    // number (a 10,000-recipient transmission asked 11 IN-lists of 1,000, one round trip each).
    const rows = await runSql<Match & { type: string }>(db, FIND_BOTH_PG, [tenantId, emails, domains]);
    return { emailRows: rows.filter((r) => r.type === 'email'), domainRows: rows.filter((r) => r.type === 'domain') };
  }
  if (emails.length > IN_CHUNK || domains.length > IN_CHUNK || emails.length === 0 || domains.length === 0) {
    return {
      emailRows: await findByIdentifiers(db, tenantId, 'email', emails),
      domainRows: await findByIdentifiers(db, tenantId, 'domain', domains),
    };
  }
  const rows = await runSql<Match & { type: string }>(db, findBothSql(db, emails.length, domains.length), [
    tenantId,
    ...emails,
    tenantId,
    ...domains,
  ]);
  return { emailRows: rows.filter((r) => r.type === 'email'), domainRows: rows.filter((r) => r.type === 'domain') };
}

const FIND_BOTH_PG =
  `select "id", "identifier", "reason_category", "scope", "type" from "suppressions" where "tenant_id" = $1 and "type" = 'email' and "identifier" = any($2::text[]) ` +
  `union all select "id", "identifier", "reason_category", "scope", "type" from "suppressions" where "tenant_id" = $1 and "type" = 'domain' and "identifier" = any($3::text[])`;

const findBothSql = shapedSql(1000, (param, _dialect, e: number, d: number) => {
  const cols = `"id", "identifier", "reason_category", "scope", "type"`;
  const emails = Array.from({ length: e }, (_, i) => param(i + 2)).join(', ');
  const domains = Array.from({ length: d }, (_, i) => param(i + 3 + e)).join(', ');
  // Parameters in text order (SQLite binds `?` positionally): the tenant is bound once per branch.
  return (
    `select ${cols} from "suppressions" where "tenant_id" = ${param(1)} and "type" = 'email' and "identifier" in (${emails}) ` +
    `union all select ${cols} from "suppressions" where "tenant_id" = ${param(e + 2)} and "type" = 'domain' and "identifier" in (${domains})`
  );
});
