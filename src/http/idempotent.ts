import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Transaction } from 'kysely';
import type { DB } from '../db/schema.ts';
import type { IdempotencyService, IdempotentResult } from '../idempotency/idempotency.service.ts';
import { authOf } from './plugins/auth.ts';

/**
 * Runs a create-style handler through the idempotency mechanism and sends its answer.
 * `work` gets the transaction in which its side effect must happen.
 */
export async function replyIdempotent(
  c: { idempotency: IdempotencyService },
  req: FastifyRequest,
  reply: FastifyReply,
  work: (trx: Transaction<DB>) => Promise<IdempotentResult>,
  opts: {
    secretFields?: readonly string[];
    /** Transaction runner, e.g. the group commit of the accept path. */
    runner?: <T>(work: (trx: Transaction<DB>) => Promise<T>) => Promise<T>;
    /** Called once the work committed (or was replayed), before the answer is sent. */
    afterCommit?: () => void;
  } = {},
) {
  const auth = authOf(req);
  const header = req.headers['idempotency-key'];
  const key = Array.isArray(header) ? header[0] : header;
  const path = req.url.split('?')[0] ?? req.url;
  const res = await c.idempotency.execute(
    {
      tenantId: auth.tenantId,
      scope: `${req.method} ${path}`,
      key,
      body: req.body,
      ...(opts.secretFields ? { secretFields: opts.secretFields } : {}),
    },
    work,
    opts.runner ? { runner: opts.runner } : {},
  );
  opts.afterCommit?.();
  if (res.replayed) reply.header('Idempotent-Replayed', 'true');
  return reply.code(res.status).send(res.body);
}
