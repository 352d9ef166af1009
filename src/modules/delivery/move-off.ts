import type { MessagesTable } from '../../db/schema.ts';
import type { Destination } from '../ip-pools/source-picker.ts';
import { attemptRecord } from './attempt-outcome.ts';
import type { Route } from './destination.ts';
import type { Outcome } from '../outcomes/outcomes.ts';
import type { Job, ResolvedWorkerOptions } from './worker-types.ts';

/** What moving jobs off a source address needs from the delivery worker (worker.ts). */
export interface MoveOffHost {
  readonly o: ResolvedWorkerOptions;
  /** The messages went back to the queue: no longer held or in flight here. */
  forget(msgs: readonly MessagesTable[]): void;
  defer(job: Job, attempt: Outcome['attempt'], diagnostic: string): void;
  /** Queues claimed messages again (here: on the address they were moved to). */
  dispatch(msgs: MessagesTable[]): Promise<void>;
}

/**
 * Jobs queued on a source address that cannot send to `to` (suspended for the site, or of a
 * family the MX hosts lack: docs/ip-pools.md): another address of their pool, or back in the
 * queue until one can.
 */
export async function moveOff(w: MoveOffHost, jobs: Job[], to: Destination, from: string, route: Route): Promise<void> {
  if (jobs.length === 0 || !w.o.sources) return;
  const { ready, waiting } = await w.o.sources.moveOff(
    jobs.map((j) => j.msg),
    to,
  );
  w.forget(waiting);
  // Kept on `from`: no address of theirs reaches the MX hosts' families. Queued again they would
  // come straight back here, so the attempt is deferred with the reason (the retry schedule runs).
  const byId = new Map(jobs.map((j) => [j.msg.id, j]));
  const moved = ready.filter((m) => m.source_address !== from);
  const response = `no address of ${route.hosts.map((h) => h.host).join(', ')} is of the family of the source address ${from}`;
  const failure = {
    ok: false as const,
    permanent: false,
    response,
    tls: false,
    transcript: [],
    stage: 'connect' as const,
  };
  const attempt = attemptRecord(new Date().toISOString(), failure, route.hosts[0]?.host ?? null, null, route);
  for (const m of ready) {
    const job = byId.get(m.id);
    if (m.source_address === from && job) w.defer(job, attempt, response);
  }
  await w.dispatch(moved);
}
