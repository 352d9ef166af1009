import type { Transaction } from 'kysely';
import type { Database } from '../db/index.ts';
import type { DB } from '../db/schema.ts';
import { canonicalJsonPaced } from '../lib/canonical-json.ts';
import { isoAt } from '../lib/clock.ts';
import { sha256Hex } from '../lib/crypto.ts';
import { AppError } from '../lib/errors.ts';
import { Pacer } from '../lib/pacer.ts';

export interface IdempotentResult {
  status: number;
  body: unknown;
}

export interface IdempotentRequest {
  tenantId: string;
  /** "METHOD /path" (the route's path with the actual ids). */
  scope: string;
  /** The Idempotency-Key header, or undefined when absent. */
  key: string | undefined;
  /** Parsed JSON body; fingerprinted as canonical JSON. */
  body: unknown;
  /** Top-level response fields holding a secret: returned once, null in every replay. */
  secretFields?: readonly string[];
}

const KEY_FORMAT = /^[\x20-\x7e]{1,255}$/;
/**
 * How long an in-flight claim blocks duplicates before a crashed request's key is taken over.
 * A claim also records its holder (this process's run), so when the process dies its claims are
 * released as soon as that is known (src/jobs/node-registry.ts) rather than after LOCK_MS.
 */
const LOCK_MS = 60_000;

export function validateIdempotencyKey(key: string): void {
  if (!KEY_FORMAT.test(key)) {
    throw new AppError('invalid_idempotency_key', 'Idempotency-Key must be 1-255 printable ASCII characters', {
      field: 'Idempotency-Key',
    });
  }
}

/**
 * One mechanism for every create-style POST (docs/api.md "Idempotency").
 * 1. Claim: insert an `in_progress` row (committed at once) so concurrent duplicates see it.
 * 2. Work: the side effect runs in a transaction that also marks the row `completed` with the
 *    response, so the two commit together or not at all.
 * 3. Failure (4xx/5xx thrown): the claim is removed, nothing final is stored, a retry runs anew.
 * A claim left by a crashed process is released when its process is known dead (a restart of
 * the node, or its heartbeat stopping: src/jobs/node-registry.ts), at the latest after LOCK_MS.
 */
export class IdempotencyService {
  constructor(
    private readonly database: Database,
    private readonly ttlHours: number,
    /** NodeSelf.holder of this process: recorded as each claim's locked_by. */
    private readonly holder: string,
  ) {}

  async execute(
    req: IdempotentRequest,
    work: (trx: Transaction<DB>) => Promise<IdempotentResult>,
    opts: {
      outside?: () => Promise<IdempotentResult>;
      /** Runs the transactional part; default: a transaction of its own (see db/group-commit.ts). */
      runner?: <T>(work: (trx: Transaction<DB>) => Promise<T>) => Promise<T>;
    } = {},
  ): Promise<IdempotentResult & { replayed: boolean }> {
    const db = this.database.db;
    const run = opts.runner ?? (<T>(w: (trx: Transaction<DB>) => Promise<T>) => db.transaction().execute(w));
    if (req.key === undefined) {
      const res = opts.outside ? await opts.outside() : await run(work);
      return { ...res, replayed: false };
    }
    validateIdempotencyKey(req.key);
    // Paced: the canonical form of a 10,000-recipient body is tens of ms of work.
    const fingerprint = sha256Hex(`${req.scope}\n${await canonicalJsonPaced(req.body ?? null, new Pacer())}`);
    const pk = { tenant_id: req.tenantId, scope: req.scope, key: req.key };

    const replay = await this.claim(pk, fingerprint);
    if (replay) return { ...replay, replayed: true };

    try {
      // `outside`: a side effect that cannot run in a transaction (an outbound HTTP call would hold
      // SQLite's only connection); it runs after the claim, and only its answer is stored below.
      const done = opts.outside ? await opts.outside() : undefined;
      const res = await run(async (trx) => {
        const result = done ?? (await work(trx));
        const stored = nullSecrets(result.body, req.secretFields ?? []);
        const upd = await trx
          .updateTable('idempotency_keys')
          .set({ state: 'completed', response_status: result.status, response_body: JSON.stringify(stored) })
          .where('tenant_id', '=', pk.tenant_id)
          .where('scope', '=', pk.scope)
          .where('key', '=', pk.key)
          .where('state', '=', 'in_progress')
          .where('fingerprint', '=', fingerprint)
          .executeTakeFirst();
        if (Number(upd.numUpdatedRows) !== 1) {
          // Our claim expired and another request took the key over: roll our work back.
          throw inProgress();
        }
        return result;
      });
      return { ...res, replayed: false };
    } catch (err) {
      await db
        .deleteFrom('idempotency_keys')
        .where('tenant_id', '=', pk.tenant_id)
        .where('scope', '=', pk.scope)
        .where('key', '=', pk.key)
        .where('state', '=', 'in_progress')
        .where('fingerprint', '=', fingerprint)
        .execute()
        .catch(() => {});
      throw err;
    }
  }

  /** Returns a stored response to replay, or null once this request owns the key. */
  private async claim(
    pk: { tenant_id: string; scope: string; key: string },
    fingerprint: string,
  ): Promise<IdempotentResult | null> {
    const db = this.database.db;
    for (let attempt = 0; attempt < 3; attempt++) {
      const now = Date.now();
      const inserted = await db
        .insertInto('idempotency_keys')
        .values({
          ...pk,
          fingerprint,
          state: 'in_progress',
          response_status: null,
          response_body: null,
          locked_until: isoAt(now + LOCK_MS),
          locked_by: this.holder,
          created_at: isoAt(now),
          expires_at: isoAt(now + this.ttlHours * 3600_000),
        })
        .onConflict((oc) => oc.columns(['tenant_id', 'scope', 'key']).doNothing())
        .executeTakeFirst();
      if (Number(inserted.numInsertedOrUpdatedRows ?? 0n) === 1) return null;

      const row = await db
        .selectFrom('idempotency_keys')
        .selectAll()
        .where('tenant_id', '=', pk.tenant_id)
        .where('scope', '=', pk.scope)
        .where('key', '=', pk.key)
        .executeTakeFirst();
      if (!row) continue; // deleted between our insert and select: try again
      const nowIso = isoAt(now);
      if (row.expires_at <= nowIso) {
        await db
          .deleteFrom('idempotency_keys')
          .where('tenant_id', '=', pk.tenant_id)
          .where('scope', '=', pk.scope)
          .where('key', '=', pk.key)
          .where('expires_at', '<=', nowIso)
          .execute();
        continue;
      }
      if (row.fingerprint !== fingerprint) {
        throw new AppError(
          'idempotency_key_reused',
          'This Idempotency-Key was already used with a different request body',
          { field: 'Idempotency-Key' },
        );
      }
      if (row.state === 'completed') {
        return { status: row.response_status ?? 200, body: JSON.parse(row.response_body ?? 'null') };
      }
      if (row.locked_until > nowIso) throw inProgress();
      // A claim abandoned by a crashed request: take it over atomically.
      const taken = await db
        .updateTable('idempotency_keys')
        .set({ locked_until: isoAt(now + LOCK_MS), locked_by: this.holder })
        .where('tenant_id', '=', pk.tenant_id)
        .where('scope', '=', pk.scope)
        .where('key', '=', pk.key)
        .where('state', '=', 'in_progress')
        .where('locked_until', '=', row.locked_until)
        .executeTakeFirst();
      if (Number(taken.numUpdatedRows) === 1) return null;
    }
    throw inProgress();
  }

  /**
   * Periodic cleanup of keys past the retention window. Returns how many were removed.
   * In batches of `batch` rows with an event-loop turn between them: one DELETE of a day's keys
   * (100,000 rows) would hold SQLite's synchronous driver, so the whole process, and the write
   * lock for its duration. At most `maxRows` per run; the next run (under its lease) goes on.
   */
  async purgeExpired({ batch = 1000, maxRows = 200_000 }: { batch?: number; maxRows?: number } = {}): Promise<number> {
    const now = isoAt(Date.now());
    let removed = 0;
    while (removed < maxRows) {
      const res = await this.database.db
        .deleteFrom('idempotency_keys')
        .where((eb) =>
          eb(
            eb.refTuple('tenant_id', 'scope', 'key'),
            'in',
            eb
              .selectFrom('idempotency_keys')
              .select(['tenant_id', 'scope', 'key'])
              .where('expires_at', '<=', now)
              .limit(Math.min(batch, maxRows - removed))
              .$asTuple('tenant_id', 'scope', 'key'),
          ),
        )
        .executeTakeFirst();
      const n = Number(res.numDeletedRows);
      removed += n;
      if (n === 0) break;
      await new Promise((r) => setImmediate(r));
    }
    return removed;
  }
}

function inProgress(): AppError {
  return new AppError('idempotency_in_progress', 'A request with this Idempotency-Key is still being processed', {
    headers: { 'Retry-After': '1' },
  });
}

function nullSecrets(body: unknown, fields: readonly string[]): unknown {
  if (!fields.length || !body || typeof body !== 'object' || Array.isArray(body)) return body;
  const copy: Record<string, unknown> = { ...(body as Record<string, unknown>) };
  for (const f of fields) if (f in copy) copy[f] = null;
  return copy;
}
