import type { Logger } from 'pino';
import type { Database } from '../../db/index.ts';
import { countOutcome, type MailMetrics } from '../../metrics/mail-metrics.ts';
import type { SuppressionsService } from '../suppressions/suppressions.service.ts';
import { type Outcome, recordOutcomes } from './outcomes.ts';

/**
 * Buffers delivery outcomes and writes them in batches: one transaction per 100 outcomes or
 * every 20 ms, whichever comes first, instead of one per message. `written(batch)` is called once
 * a batch is done (written, or failed: then its messages stay leased and come back after the
 * lease, so every message is still delivered at least once).
 */
export class OutcomeBuffer {
  private pending: Outcome[] = [];
  private flushing: Promise<void> | null = null;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly o: {
      database: Database;
      suppressions: SuppressionsService;
      workerId: string;
      logger: Logger;
      written(batch: Outcome[]): void;
      /** Counts each outcome as it is added (src/metrics/mail-metrics.ts). */
      metrics?: MailMetrics | undefined;
    },
  ) {}

  add(outcome: Outcome): void {
    if (this.o.metrics) countOutcome(this.o.metrics, outcome);
    this.pending.push(outcome);
    if (this.pending.length >= 100) void this.flush();
    else if (!this.timer) this.timer = setTimeout(() => void this.flush(), 20);
  }

  /** Writes what is buffered in one transaction (after any write already running). */
  async flush(): Promise<void> {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    while (this.flushing) await this.flushing;
    const batch = this.pending.splice(0);
    if (batch.length === 0) return;
    this.flushing = recordOutcomes(this.o.database, this.o.suppressions, this.o.workerId, batch)
      .then(() => undefined)
      .catch((err) => {
        this.o.logger.error({ err, count: batch.length }, 'recording delivery outcomes failed');
      })
      .finally(() => {
        this.o.written(batch);
        this.flushing = null;
      });
    await this.flushing;
  }
}
