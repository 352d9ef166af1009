import type { Kysely } from 'kysely';
import type { DB } from '../../db/schema.ts';
import type { ReceivedMessage, Received, RecipientHandler } from '../../mail/recipient-handler.ts';
import type { FeedbackService } from './feedback.service.ts';
import type { ReportTarget } from './report-batch.ts';
import { verpTokenOf } from '../outcomes/verp.ts';

/**
 * The inbound listener's recipient handlers for bounces and complaints (registered in
 * src/smtp/inbound-recipients.ts). An address whose token does not verify, or an `fbl@` of a
 * domain nobody registered, is not ours: the listener refuses it like any stranger's.
 */

async function received(feedback: FeedbackService, message: ReceivedMessage, target: ReportTarget): Promise<Received> {
  const report = await message.read(feedback.readReport);
  return { result: await feedback.apply(report, target), about: { kind: report.kind } };
}

/**
 * `bounces+<signed token>@<any domain>`: the envelope sender of every message sent
 * (outcomes/verp.ts), so DSNs and auto-replies come back here; the token names the one message a
 * report may change.
 */
export function verpReports(feedback: FeedbackService): RecipientHandler<ReportTarget> {
  return {
    name: 'verp',
    match(recipient) {
      const token = verpTokenOf(`${recipient.local}@${recipient.domain}`);
      const messageId = token ? feedback.messageOfToken(token) : null;
      return messageId ? { accept: { kind: 'verp', messageId } } : null;
    },
    receive: (message, target) => received(feedback, message, target),
  };
}

/**
 * `fbl@<a return-path domain>` or `fbl@<the bounce host>`: where feedback loops send ARF
 * complaints. A report there may only reach messages of the tenants that own that return-path
 * domain (any tenant's for the shared bounce host, where a signed token must then name it).
 */
export function fblReports(
  feedback: FeedbackService,
  db: Kysely<DB>,
  bounceHost: string,
): RecipientHandler<ReportTarget> {
  return {
    name: 'fbl',
    async match(recipient) {
      if (recipient.local !== 'fbl') return null;
      if (recipient.domain === bounceHost) return { accept: { kind: 'fbl', tenants: null } };
      const rows = await db
        .selectFrom('sending_domains')
        .select('tenant_id')
        .where('return_path_domain', '=', recipient.domain)
        .execute();
      if (rows.length === 0) return null;
      return { accept: { kind: 'fbl', tenants: [...new Set(rows.map((r) => r.tenant_id))] } };
    },
    receive: (message, target) => received(feedback, message, target),
  };
}
