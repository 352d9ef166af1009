import { dialectSql, shapedSql } from '../../db/dialect.ts';
import { RELEASED_STATE_SQL, WAITING_SQL } from '../../db/message-state.ts';
import { PACKED_MESSAGE_SQL } from './packed-rows.ts';

/**
 * Every statement of the delivery queue, in one file (as pg-boss and graphile-worker keep
 * theirs), so that claims, leases, releases and outcomes can be read together. The queue is the
 * messages table itself (no second queue to lose), and these are all the writes of a message's
 * state after acceptance: a new row is written by the accept path (transmissions), every change
 * of its state by a statement here. The callers run them with runSql (src/db/dialect.ts).
 *
 * A row's life: `queued` -> claimed: `sending`, locked_by = the claiming worker, locked_until =
 * next_attempt_at = the lease's end -> an outcome (`delivered`, `deferred`, `bounced`, `failed`;
 * lock cleared), or released: due again in `queued` / `deferred` without an attempt counted (by
 * its worker, the source picker, or a node that found the holder dead). A report may later turn
 * `delivered` into `bounced`. Every write but a claim touches only rows its writer holds
 * (locked_by), and a report's only `delivered` rows.
 *
 * Indexes (migration 020): messages_waiting and messages_waiting_fair hold the waiting rows
 * (queued, deferred), messages_leased the `sending` ones. States are literals in the text, for
 * the planners to use those partial indexes: a bound list made them sort every due row.
 */

// ---- Claims -------------------------------------------------------------------------------

/**
 * [until, workerId, now, limit]: the old FIFO claim by due time, kept for bench/fair-claim.ts to
 * compare against (the worker claims fairly, below). PostgreSQL: FOR UPDATE SKIP LOCKED lets
 * many workers claim disjoint batches; SQLite's UPDATE ... RETURNING is atomic under its single
 * writer lock.
 */
export const CLAIM_BY_DUE_TIME = dialectSql({
  // INDEXED BY: without statistics SQLite may pick another index and sort every due row.
  sqlite:
    `update messages set state = 'sending', locked_until = ?, locked_by = ?, next_attempt_at = ?, updated_at = ? ` +
    `where id in (select id from messages indexed by messages_waiting where ${WAITING_SQL} ` +
    'and next_attempt_at <= ? order by next_attempt_at limit ?) returning *',
  sqliteArgs: [0, 1, 0, 2, 2, 3],
  // = any(array(...)): the due ids are picked first (an InitPlan), then fetched by primary key;
  // `in (select ...)` let the planner hash-join against a scan of the whole table.
  postgres:
    `update messages set state = 'sending', locked_until = $1, locked_by = $2, next_attempt_at = $1, updated_at = $3 ` +
    `where id = any(array(select id from messages where ${WAITING_SQL} and next_attempt_at <= $3 ` +
    'order by next_attempt_at limit $4 for update skip locked)) returning *',
});

/** [now] -> a row if any waiting message is due (messages_waiting: one index probe). */
export const ANY_DUE = dialectSql({
  sqlite: `select id from messages indexed by messages_waiting where ${WAITING_SQL} and next_attempt_at <= ? limit 1`,
  postgres: `select id from messages where ${WAITING_SQL} and next_attempt_at <= $1 limit 1`,
});

/**
 * [until, workerId, now, limit, skip] -> rows whose lease ran out (their worker died, or its
 * send outlived the lease), taken over with a new lease: crash recovery and node takeover. They
 * are no longer in the waiting indexes the fair claim reads, so every claim first probes
 * messages_leased (locked_until, `sending` only): one index probe when none ran out. Taken in
 * lease order, not by tenant: they were claimed once already, so they were the oldest due.
 */
export const TAKE_EXPIRED = dialectSql({
  sqlite:
    'update messages set locked_until = ?, locked_by = ?, next_attempt_at = ?, updated_at = ? ' +
    "where id in (select id from messages indexed by messages_leased where state = 'sending' and locked_until <= ? " +
    'and tenant_id not in (select value from json_each(?)) order by locked_until limit ?) returning *',
  sqliteArgs: [0, 1, 0, 2, 2, 4, 3],
  postgres:
    'update messages set locked_until = $1, locked_by = $2, next_attempt_at = $1, updated_at = $3 ' +
    "where id = any(array(select id from messages where state = 'sending' and locked_until <= $3 " +
    'and not (tenant_id = any($5::text[])) order by locked_until limit $4 for update skip locked)) ' +
    "and state = 'sending' and locked_until <= $3 returning *",
});

/** [cursor, count] -> the next tenants with waiting work after `cursor` (a skip scan). */
export const NEXT_TENANTS = dialectSql({
  // INDEXED BY: other tenant-led indexes also cover tenant_id but hold every finished row.
  sqlite:
    'with recursive t(tenant_id, n) as (' +
    `select (select tenant_id from messages indexed by messages_waiting_fair where ${WAITING_SQL} and tenant_id > ? order by tenant_id limit 1), 1 ` +
    'union all ' +
    `select (select m.tenant_id from messages m indexed by messages_waiting_fair where m.${WAITING_SQL} and m.tenant_id > t.tenant_id order by m.tenant_id limit 1), t.n + 1 ` +
    'from t where t.tenant_id is not null and t.n < ?) select tenant_id from t where tenant_id is not null',
  postgres:
    'with recursive t(tenant_id, n) as (' +
    `select (select tenant_id from messages where ${WAITING_SQL} and tenant_id > $1 order by tenant_id limit 1), 1 ` +
    'union all ' +
    `select (select m.tenant_id from messages m where m.${WAITING_SQL} and m.tenant_id > t.tenant_id order by m.tenant_id limit 1), t.n + 1 ` +
    'from t where t.tenant_id is not null and t.n < $2) select tenant_id from t where tenant_id is not null',
});

/**
 * PostgreSQL, in one statement: [until, workerId, now, tenants, perTenant, limit]. Each tenant's
 * share is a LATERAL pair of index ranges (priority 0 first; the Append stops at the limit), and
 * the picked rows are locked with SKIP LOCKED before the update re-checks them.
 */
const TAKE_FAIR_PG =
  `update messages set state = 'sending', locked_until = $1, locked_by = $2, next_attempt_at = $1, updated_at = $3 ` +
  `where id = any(array(select id from messages where id = any(array(` +
  'select x.id from unnest($4::text[]) as t(tid) cross join lateral (' +
  `(select id from messages where tenant_id = t.tid and ${WAITING_SQL} and priority = 0 and next_attempt_at <= $3 order by next_attempt_at limit $5) ` +
  'union all ' +
  `(select id from messages where tenant_id = t.tid and ${WAITING_SQL} and priority = 1 and next_attempt_at <= $3 order by next_attempt_at limit $5) ` +
  `limit $5) x limit $6)) and ${WAITING_SQL} and next_attempt_at <= $3 for update skip locked)) returning *`;

/**
 * The fair claim in one statement: [until, workerId, now, tenants, share, limit] -> the claimed
 * rows (src/modules/delivery/fair-claim.ts walks the tenants).
 * SQLite: for each tenant in walk order (CROSS JOIN keeps json_each first), a correlated pair of
 * index ranges of messages_waiting_fair (priority 0 first, each in due order, `share` in all), then the
 * update, under SQLite's writer lock so no other worker takes a row in between.
 * Before, the picks were 64 short statements (two per tenant) before the UPDATE: their trips
 * through the driver cost more than their index ranges (docs/benchmarks.md, "Fair claims"). The
 * text is short enough for the statement cache (src/db/statement-cache.ts). The unary `+` keeps the re-check out of the planner's index choice: on `next_attempt_at <= ?`
 * it walked the due-order index over every due row instead of looking up the ids by primary key.
 * The picks are rowids, which every index entry holds: the ranges read only the index and the
 * update goes to each row directly, where picking `id` read each row from the table, then looked
 * it up again in the primary key's index twice (the join and the update). The rows come back
 * packed (packed-rows.ts). Both cut the claim's CPU (docs/benchmarks.md "Session 13"). A rowid is
 * only used inside this one statement, so nothing depends on it staying the same.
 */
export const TAKE_FAIR = dialectSql({
  sqlite:
    `update messages set state = 'sending', locked_until = ?, locked_by = ?, next_attempt_at = ?, updated_at = ? ` +
    'where rowid in (select m.rowid from json_each(?) t cross join messages m on m.rowid in (' +
    `select r from (select rowid as r from messages indexed by messages_waiting_fair where tenant_id = t.value and ${WAITING_SQL} ` +
    'and priority = 0 and next_attempt_at <= ? order by next_attempt_at limit ?) union all ' +
    `select r from (select rowid as r from messages indexed by messages_waiting_fair where tenant_id = t.value and ${WAITING_SQL} ` +
    'and priority = 1 and next_attempt_at <= ? order by next_attempt_at limit ?) limit ?) limit ?) ' +
    `and +${WAITING_SQL} and +next_attempt_at <= ? returning ${PACKED_MESSAGE_SQL}`,
  sqliteArgs: [0, 1, 0, 2, 3, 2, 4, 2, 4, 4, 5, 2],
  postgres: TAKE_FAIR_PG,
});

/**
 * [] -> the earliest time a claim could take something: the first waiting message's due time
 * and the first lease's end (`sending` rows' next_attempt_at is their lease's end), one index
 * probe each (messages_waiting, messages_leased).
 */
export const NEXT_DUE = dialectSql({
  sqlite:
    `select (select min(next_attempt_at) from messages indexed by messages_waiting where ${WAITING_SQL}) as waiting, ` +
    "(select min(locked_until) from messages indexed by messages_leased where state = 'sending') as leased",
  postgres:
    `select (select min(next_attempt_at) from messages where ${WAITING_SQL}) as waiting, ` +
    "(select min(locked_until) from messages where state = 'sending') as leased",
});

// ---- A claimed row ------------------------------------------------------------------------

/** [address, ids, workerId]: the source address chosen for rows this worker still holds. */
export const SET_SOURCE = dialectSql({
  sqlite: 'update messages set source_address = ? where id in (select value from json_each(?)) and locked_by = ?',
  postgres: 'update messages set source_address = $1 where id = any($2::text[]) and locked_by = $3',
});

// ---- Releases: back in the queue, no attempt counted ---------------------------------------

/**
 * [dueAt, workerId, ids]: claimed rows this worker did not send, due again at `dueAt` (at once,
 * as a lease running out would make them, or when a pacing slot opens): `deferred` if they had
 * been tried before, else `queued`. Rows another worker has taken meanwhile are left alone.
 * Callers pass the ids sorted, so concurrent statements on PostgreSQL lock rows in one order.
 */
export const RELEASE = dialectSql({
  sqlite:
    `update messages set state = ${RELEASED_STATE_SQL}, next_attempt_at = ?, locked_by = null, locked_until = null ` +
    'where id in (select value from json_each(?)) and locked_by = ?',
  sqliteArgs: [0, 2, 1],
  postgres:
    `update messages set state = ${RELEASED_STATE_SQL}, next_attempt_at = $1, locked_by = null, locked_until = null ` +
    'where id = any($3::text[]) and locked_by = $2',
});

/**
 * [now, holder]: everything a dead run of a node held (src/release-claims.ts), due at once.
 * `state = 'sending'` reads the partial index messages_leased, not the table.
 */
export const RELEASE_HOLDER = dialectSql({
  sqlite:
    `update messages set state = ${RELEASED_STATE_SQL}, next_attempt_at = ?, locked_by = null, locked_until = null, ` +
    "updated_at = ? where state = 'sending' and locked_by = ?",
  sqliteArgs: [0, 0, 1],
  postgres:
    `update messages set state = ${RELEASED_STATE_SQL}, next_attempt_at = $1, locked_by = null, locked_until = null, ` +
    "updated_at = $1 where state = 'sending' and locked_by = $2",
});

// ---- Outcomes -------------------------------------------------------------------------------

/*
 * [now, workerId, ids, states, attempt counts, next attempts, last responses] -> the ids written.
 * One UPDATE for a whole batch of outcomes (outcomes.ts) instead of one statement per message: on
 * PostgreSQL each statement is a round trip inside the transaction, and on both backends building
 * a statement per message through Kysely cost more CPU than running it. Values are always bound.
 *
 * Ownership is `locked_by = <this worker>` alone: claims set it together with state 'sending'
 * and every other write clears it, so it implies 'sending' under our lease. Leaving the state out
 * matters on PostgreSQL: with it, stale statistics (a queue's state counts change by thousands a
 * second) led the planner to walk every 'sending' row for each outcome (nested loop over
 * messages_due); without it the plan is one primary-key lookup per outcome.
 */
export const OUTCOMES_PG =
  'update messages set state = v.state, attempt_count = v.attempt_count, next_attempt_at = v.next_attempt_at, ' +
  'locked_until = null, locked_by = null, last_response = v.last_response, updated_at = $1 ' +
  'from unnest($3::text[], $4::text[], $5::integer[], $6::text[], $7::text[]) ' +
  'as v(id, state, attempt_count, next_attempt_at, last_response) ' +
  'where messages.id = v.id and messages.locked_by = $2 returning messages.id';

/**
 * The same on SQLite for `rows` outcomes: [now, then per row (id, state, attempt count, next
 * attempt, last response), workerId]. VALUES columns are column1..column5; binding is positional
 * in text order.
 */
export const outcomesSqlite = shapedSql(600, (_param, _dialect, rows: number) => {
  const tuples = Array.from({ length: rows }, () => '(?, ?, ?, ?, ?)').join(', ');
  return (
    'update messages set state = v.column2, attempt_count = v.column3, next_attempt_at = v.column4, ' +
    'locked_until = null, locked_by = null, last_response = v.column5, updated_at = ? ' +
    `from (values ${tuples}) as v where messages.id = v.column1 and messages.locked_by = ? returning messages.id`
  );
});

/**
 * [now, rows `[id, tenant_id, last_response]` as one JSON parameter] -> the ids that moved: a
 * report's bounce of a message already `delivered` (report-outcomes.ts); any other state stays.
 * SQLite: `+messages.state` keeps the planner off messages_due (state, ...): with it, it walked
 * every delivered message for each row of the batch (measured: 60% of the CPU of bench:inbound);
 * without, each row is one primary-key lookup.
 */
export const REPORTED_BOUNCE = dialectSql({
  sqlite:
    "update messages set state = 'bounced', last_response = j.value ->> 2, updated_at = ? " +
    'from json_each(?) as j ' +
    "where messages.id = j.value ->> 0 and messages.tenant_id = j.value ->> 1 and +messages.state = 'delivered' " +
    'returning messages.id',
  postgres:
    "update messages set state = 'bounced', last_response = j ->> 2, updated_at = $1 " +
    'from jsonb_array_elements($2::jsonb) as j ' +
    "where messages.id = j ->> 0 and messages.tenant_id = j ->> 1 and messages.state = 'delivered' " +
    'returning messages.id',
});
