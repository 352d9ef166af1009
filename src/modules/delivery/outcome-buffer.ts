import type { Logger } from 'pino';
import type { Database } from '../../db/index.ts';
import type { MailMetrics } from '../../metrics/mail-metrics.ts';
import { countOutcome } from './delivery-metrics.ts';
import type { SuppressionsService } from '../suppressions/suppressions.service.ts';
import { type Outcome, recordOutcomes } from '../outcomes/outcomes.ts';

/**
 * Most outcomes one transaction writes. Sandbox messages complete as soon as they are claimed,
 * so outcomes can pile up (up to the 2,000 messages in flight) while one batch is written; the
 * next flush used to take them all into one transaction (a 10,000-recipient
 * sandbox transmission stalled the event loop 0.6-0.8 s). Measured for 1,900 sandbox outcomes in
 * one transaction: 180-230 ms without a turn on SQLite, whose driver never yields, and a 40-85 ms
 * stretch on PostgreSQL (statement building and result handling). Per batch of this size: about
 * 10-20 ms on either. PostgreSQL keeps larger batches: its commits wait for the disk, so under
 * load fewer, larger transactions keep the delivery rate up.
 */
export const MAX_OUTCOME_BATCH = { sqlite: 100, postgres: 500 } as const;

/**
 * Buffers delivery outcomes and writes them in batches: one transaction per 100 outcomes or
 * every 20 ms, whichever comes first, instead of one per message. What piled up meanwhile is
 * written in batches of at most MAX_OUTCOME_BATCH, one after the other, with an event-loop turn
 * between them. `written(batch)` is called once a batch is done (written, or failed: then its
 * messages stay leased and come back after the lease, so every message is still delivered at
 * least once).
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

  /** Writes what is buffered (after any write already running), batch by batch. */
  async flush(): Promise<void> {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    while (this.flushing) await this.flushing;
    if (this.pending.length === 0) return;
    // One writer at a time: `flushing` covers the whole drain, the turns between batches too.
    this.flushing = this.drain().finally(() => {
      this.flushing = null;
    });
    await this.flushing;
  }

  private async drain(): Promise<void> {
    const max = MAX_OUTCOME_BATCH[this.o.database.dialect];
    for (;;) {
      const batch = this.pending.splice(0, max);
      if (batch.length === 0) return;
      try {
        await recordOutcomes(this.o.database, this.o.suppressions, this.o.workerId, batch);
      } catch (err) {
        this.o.logger.error({ err, count: batch.length }, 'recording delivery outcomes failed');
      } finally {
        this.o.written(batch);
      }
      if (this.pending.length > 0) await new Promise<void>((resolve) => setImmediate(resolve));
    }
  }
}
