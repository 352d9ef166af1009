import type { Logger } from 'pino';
import type { Database } from '../../db/index.ts';
import { isoAt } from '../../lib/clock.ts';
import { applyCompletions, type CompletionWrite, type DisabledWebhook } from './completions.repo.ts';

/**
 * The dispatcher's outcomes (units finished, attempt log entries, failure tracking), buffered
 * and written in one transaction per flush (every flushIntervalMs, or at once past 500 writes).
 * On a database error they stay buffered for the next flush: the units' leases keep another
 * node from sending them meanwhile.
 */
export class OutcomeBuffer {
  private pending: CompletionWrite[] = [];
  private flushing: Promise<void> | null = null;

  constructor(
    private readonly database: Database,
    private readonly logger: Logger,
    private readonly autoDisableAfterMs: number,
    /** Webhooks the last flush disabled (410, or five days of failures). */
    private readonly onDisabled: (disabled: DisabledWebhook[]) => void,
  ) {}

  /** Something is buffered or being written. */
  get busy(): boolean {
    return this.pending.length > 0 || this.flushing !== null;
  }

  record(writes: CompletionWrite[]): void {
    for (const w of writes) this.pending.push(w);
    if (this.pending.length >= 500) void this.flush();
  }

  async flush(): Promise<void> {
    if (this.flushing) return this.flushing;
    if (this.pending.length === 0) return;
    const writes = this.pending;
    this.pending = [];
    this.flushing = (async () => {
      try {
        const disabled = await applyCompletions(this.database, writes, isoAt(Date.now() - this.autoDisableAfterMs));
        for (const d of disabled) this.logger.warn({ webhook: d.id, reason: d.reason }, 'webhook disabled');
        if (disabled.length) this.onDisabled(disabled);
      } catch (err) {
        this.logger.error({ err }, 'webhook outcomes not written; retrying');
        this.pending = writes.concat(this.pending);
      } finally {
        this.flushing = null;
      }
    })();
    return this.flushing;
  }
}
