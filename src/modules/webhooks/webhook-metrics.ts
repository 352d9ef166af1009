import type { MailMetrics } from '../../metrics/mail-metrics.ts';
import type { Job } from './jobs.ts';
import type { SendResult } from './sender.ts';

/** One webhook POST: its outcome, and when accepted, the age of the oldest event it carried. */
export function countWebhookPost(m: MailMetrics, job: Job, res: SendResult, nowMs: number): void {
  const outcome = res.ok ? 'success' : res.statusCode === null ? 'network_error' : 'http_error';
  m.webhookAttempts.inc({ outcome });
  if (!res.ok) return;
  let oldest = Number.POSITIVE_INFINITY;
  for (const p of job.parts) oldest = Math.min(oldest, Date.parse(p.unit.oldestEventAt));
  if (Number.isFinite(oldest)) m.webhookLagSeconds.observe(Math.max(0, nowMs - oldest) / 1000);
}
