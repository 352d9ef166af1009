/**
 * How the delivery worker waits after a claim that found nothing: its poll interval, cut short at
 * once by stop(), and by a nudge (mail accepted in this process: TransmissionsService.queued)
 * NUDGE_GAP_MS after the claim began at the latest.
 *
 * Without the nudge, a message accepted while the worker slept waited for the next poll (250 ms):
 * with one tenant's transmission holding its share of the worker (the claims pass it over, so
 * they find nothing), another tenant's password reset waited that long while the first tenant's
 * sessions kept sending. The gap keeps a stream of small accepts from turning into a
 * claim each: at most one nudged claim per NUDGE_GAP_MS. A nudge that comes during a claim is
 * kept for the wait after it (that claim may have read the queue before the accept committed).
 */
export const NUDGE_GAP_MS = 20;

export class IdleWait {
  private nudged = false;
  private claimStartedAt = 0;
  private timer: NodeJS.Timeout | null = null;
  private done: (() => void) | null = null;

  /** A claim begins now. */
  claiming(now = Date.now()): void {
    this.claimStartedAt = now;
    this.nudged = false;
  }

  /** Resolves after `ms`, or sooner on a nudge or wake(). */
  sleep(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      this.done = () => {
        if (this.timer) clearTimeout(this.timer);
        this.timer = null;
        this.done = null;
        resolve();
      };
      this.arm(this.nudged ? this.nudgeDelay() : ms);
    });
  }

  /** New mail was queued in this process. */
  nudge(): void {
    this.nudged = true;
    if (this.done) this.arm(this.nudgeDelay());
  }

  /** Ends the current wait at once (stop). */
  wake(): void {
    this.done?.();
  }

  private nudgeDelay(): number {
    return Math.max(0, this.claimStartedAt + NUDGE_GAP_MS - Date.now());
  }

  private arm(ms: number): void {
    if (this.timer) clearTimeout(this.timer);
    const done = this.done;
    this.timer = setTimeout(() => done?.(), ms);
  }
}
