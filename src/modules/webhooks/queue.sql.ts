import { dialectSql } from '../../db/dialect.ts';

/**
 * The webhook queue's statements (the outbox, its fan-out into delivery units, their claims,
 * leases, releases and outcomes) as fixed SQL text per dialect (src/db/dialect.ts), in one file
 * as the delivery queue's are (src/modules/outcomes/queue.sql.ts). Building them through Kysely's
 * query builder for every claim, fan-out round and flush cost more CPU than the database took to
 * run them (profile of bench:webhooks). A list of ids is one parameter, so each statement has
 * exactly one text whatever the list length. Units are inserted with insertMany (src/db/batch.ts).
 */

/**
 * A text column as a JSON value, null as null; both escape as JSON.stringify does. The stored
 * JSON columns (tags, metadata, data) are spliced in as they are, as eventJson() does: never
 * parsed, so a malformed one cannot stop fan-out.
 */
const sqliteJson = (col: string) => `json_quote("${col}")`;
/** PostgreSQL: to_json of text, null as null. */
const pgJson = (col: string) => `coalesce(to_json("${col}")::text, 'null')`;

/** A one-row CTE that sets synchronous_commit = off for the statement's transaction (see claimOldest). */
const PG_RELAXED = `"cfg" as (select set_config('synchronous_commit', 'off', true) as "v")`;

export const SQL = {
  /** [limit] */
  outboxFront: dialectSql({
    sqlite: 'select "event_id", "tenant_id" from "webhook_outbox" order by "event_id" limit ?',
    postgres:
      'select "event_id", "tenant_id" from "webhook_outbox" order by "event_id" limit $1 for update skip locked',
  }),
  /**
   * [ids] Events to route, each with its JSON body as eventJson() would build it, built by the
   * database: one string per event instead of eleven columns plus the concatenation in JS (GC
   * was the largest cost of batch delivery). Byte-identical: test/webhooks/queue.test.ts.
   */
  eventsToRoute: dialectSql({
    sqlite:
      `select "id", "tenant_id", "type", "created_at", '{"id":' || ${sqliteJson('id')} || ',"type":' || ${sqliteJson('type')} || ` +
      `',"created_at":' || ${sqliteJson('created_at')} || ',"tenant_id":' || ${sqliteJson('tenant_id')} || ` +
      `',"transmission_id":' || ${sqliteJson('transmission_id')} || ',"message_id":' || ${sqliteJson('message_id')} || ` +
      `',"recipient":' || ${sqliteJson('recipient')} || ',"mail_type":' || ${sqliteJson('mail_type')} || ` +
      `',"tags":' || "tags" || ',"metadata":' || "metadata" || ',"data":' || "data" || '}' as "body" ` +
      'from "events" where "id" in (select value from json_each(?))',
    postgres:
      `select "id", "tenant_id", "type", "created_at", '{"id":' || ${pgJson('id')} || ',"type":' || ${pgJson('type')} || ` +
      `',"created_at":' || ${pgJson('created_at')} || ',"tenant_id":' || ${pgJson('tenant_id')} || ` +
      `',"transmission_id":' || ${pgJson('transmission_id')} || ',"message_id":' || ${pgJson('message_id')} || ` +
      `',"recipient":' || ${pgJson('recipient')} || ',"mail_type":' || ${pgJson('mail_type')} || ` +
      `',"tags":' || "tags" || ',"metadata":' || "metadata" || ',"data":' || "data" || '}' as "body" ` +
      'from "events" where "id" = any($1::text[])',
  }),
  /** [ids] */
  eventsById: dialectSql({
    sqlite: 'select * from "events" where "id" in (select value from json_each(?))',
    postgres: 'select * from "events" where "id" = any($1::text[])',
  }),
  /** [ids] */
  deleteOutbox: dialectSql({
    sqlite: 'delete from "webhook_outbox" where "event_id" in (select value from json_each(?))',
    postgres: 'delete from "webhook_outbox" where "event_id" = any($1::text[])',
  }),
  /** [webhookId, now, limit] */
  peekDue: dialectSql({
    sqlite:
      'select "id", "event_count", "next_attempt_at" from "webhook_queue" where "webhook_id" = ? and "next_attempt_at" <= ? ' +
      'and ("locked_until" is null or "locked_until" < ?) order by "next_attempt_at" limit ?',
    sqliteArgs: [0, 1, 1, 2],
    postgres:
      'select "id", "event_count", "next_attempt_at" from "webhook_queue" where "webhook_id" = $1 and "next_attempt_at" <= $2 ' +
      'and ("locked_until" is null or "locked_until" < $2) order by "next_attempt_at" limit $3',
  }),
  /**
   * [webhookId, now, limit, until, holder]. The claim also moves next_attempt_at to the end of
   * the lease: the due-index range then holds only claimable units (due ones and expired leases),
   * instead of every in-flight unit that each claim had to step over.
   */
  claimOldest: dialectSql({
    sqlite:
      'update "webhook_queue" set "locked_until" = ?, "locked_by" = ?, "next_attempt_at" = ? ' +
      'where "webhook_id" = ? and "id" in (select "id" from "webhook_queue" where "webhook_id" = ? and "next_attempt_at" <= ? ' +
      'and ("locked_until" is null or "locked_until" < ?) order by "next_attempt_at" limit ?) ' +
      'returning "id", "event_ids", "attempts", "tenant_id", "oldest_event_at"',
    sqliteArgs: [3, 4, 3, 0, 0, 1, 1, 2],
    // One statement, so one round trip: no BEGIN / SET LOCAL / COMMIT around it. The cfg CTE
    // turns synchronous_commit off for this statement's own transaction (a claim is safe to
    // lose: see relaxed() in queue.repo.ts); PostgreSQL applies the value in force at commit.
    // MATERIALIZED: as a plain IN (subquery) the subquery may run more than once and pick other
    // rows each time. The outer condition is re-checked if a row changed meanwhile.
    postgres:
      `with ${PG_RELAXED}, "due" as materialized (select q."id" from "cfg", "webhook_queue" q where q."webhook_id" = $1 ` +
      'and q."next_attempt_at" <= $2 and (q."locked_until" is null or q."locked_until" < $2) order by q."next_attempt_at" ' +
      'limit $3 for update of q skip locked) ' +
      'update "webhook_queue" set "locked_until" = $4, "locked_by" = $5, "next_attempt_at" = $4 ' +
      'where "webhook_id" = $1 and "id" in (select "id" from "due") and ("locked_until" is null or "locked_until" < $2) ' +
      'returning "id", "event_ids", "attempts", "tenant_id", "oldest_event_at"',
  }),
  /** [webhookId, now, ids, until, holder] */
  claimIds: dialectSql({
    sqlite:
      'update "webhook_queue" set "locked_until" = ?, "locked_by" = ?, "next_attempt_at" = ? ' +
      'where "webhook_id" = ? and "id" in (select value from json_each(?)) ' +
      'and ("locked_until" is null or "locked_until" < ?) returning "id", "event_ids", "attempts", "tenant_id", "oldest_event_at"',
    sqliteArgs: [3, 4, 3, 0, 2, 1],
    postgres:
      `with ${PG_RELAXED}, "due" as materialized (select q."id" from "cfg", "webhook_queue" q where q."webhook_id" = $1 ` +
      'and q."id" = any($3::text[]) and (q."locked_until" is null or q."locked_until" < $2) for update of q skip locked) ' +
      'update "webhook_queue" set "locked_until" = $4, "locked_by" = $5, "next_attempt_at" = $4 ' +
      'where "webhook_id" = $1 and "id" in (select "id" from "due") and ("locked_until" is null or "locked_until" < $2) ' +
      'returning "id", "event_ids", "attempts", "tenant_id", "oldest_event_at"',
  }),
  /** [webhookId, ids] */
  deleteUnits: dialectSql({
    sqlite: 'delete from "webhook_queue" where "webhook_id" = ? and "id" in (select value from json_each(?))',
    postgres: 'delete from "webhook_queue" where "webhook_id" = $1 and "id" = any($2::text[])',
  }),
  /** [webhookId, holder, now, ids]: gives back claimed units that were never attempted. */
  releaseUnits: dialectSql({
    sqlite:
      'update "webhook_queue" set "locked_until" = null, "locked_by" = null, "next_attempt_at" = ? ' +
      'where "webhook_id" = ? and "locked_by" = ? and "id" in (select value from json_each(?))',
    sqliteArgs: [2, 0, 1, 3],
    postgres:
      'update "webhook_queue" set "locked_until" = null, "locked_by" = null, "next_attempt_at" = $3 ' +
      'where "webhook_id" = $1 and "locked_by" = $2 and "id" = any($4::text[])',
  }),
  /**
   * [holder, now]: every unit `holder` still holds, due again at once with no attempt counted: a
   * node stopping (queue.repo.ts releaseClaims), or a dead run of one (src/release-claims.ts).
   */
  releaseHolder: dialectSql({
    sqlite:
      'update "webhook_queue" set "locked_until" = null, "locked_by" = null, "next_attempt_at" = ? where "locked_by" = ?',
    sqliteArgs: [1, 0],
    postgres:
      'update "webhook_queue" set "locked_until" = null, "locked_by" = null, "next_attempt_at" = $2 where "locked_by" = $1',
  }),
  /** [webhookId, id, eventIds, eventCount, attempts, nextAt]: a unit kept for another attempt, lease cleared. */
  retryUnit: dialectSql({
    sqlite:
      'update "webhook_queue" set "event_ids" = ?, "event_count" = ?, "attempts" = ?, "next_attempt_at" = ?, ' +
      '"locked_until" = null, "locked_by" = null where "webhook_id" = ? and "id" = ?',
    sqliteArgs: [2, 3, 4, 5, 0, 1],
    postgres:
      'update "webhook_queue" set "event_ids" = $3, "event_count" = $4, "attempts" = $5, "next_attempt_at" = $6, ' +
      '"locked_until" = null, "locked_by" = null where "webhook_id" = $1 and "id" = $2',
  }),
  /** [webhookId]: every unit of a webhook, deleted or disabled (it receives nothing more). */
  dropQueue: dialectSql({
    sqlite: 'delete from "webhook_queue" where "webhook_id" = ?',
    postgres: 'delete from "webhook_queue" where "webhook_id" = $1',
  }),
  /** [at, id] */
  webhookSucceeded: dialectSql({
    sqlite: 'update "webhooks" set "failing_since" = null, "last_success_at" = ? where "id" = ?',
    postgres: 'update "webhooks" set "failing_since" = null, "last_success_at" = $1 where "id" = $2',
  }),
};
