import type { Logger } from 'pino';

/** What a periodic chore needs of its node: where to log a failure, and the set close() clears. */
export interface ChoreHost {
  logger: Logger;
  /** Periodic background chores of this node; started by roles, stopped by the container's close(). */
  timers: Set<NodeJS.Timeout>;
}

/** Registers a periodic chore that never overlaps itself and never crashes the process. */
export function every(host: ChoreHost, ms: number, name: string, fn: () => Promise<unknown>): void {
  let running = false;
  const t = setInterval(() => {
    if (running) return;
    running = true;
    fn()
      .catch((err) => host.logger.error({ err, task: name }, 'periodic task failed'))
      .finally(() => {
        running = false;
      });
  }, ms);
  t.unref();
  host.timers.add(t);
}
