import type { Container } from '../container.ts';
import { fblReports, verpReports } from '../modules/feedback/recipients.ts';
import { mailtoUnsubscribe } from '../modules/tracking/mailto-unsubscribe.ts';
import type { RecipientHandler } from '../mail/recipient-handler.ts';

/**
 * What each recipient address of the inbound listener means, asked in this order; the first
 * handler that claims an address decides, and one that none claims is refused (recipient-table.ts).
 * A new kind of inbound mail adds its handler here and changes nothing in the listener
 * (docs/ARCHITECTURE.md, "Adding a kind of inbound mail"). Each entry hands its handler the
 * services it uses, built in src/container.ts.
 */
export const INBOUND_RECIPIENTS: readonly ((c: Container) => RecipientHandler)[] = [
  (c) => mailtoUnsubscribe(c.tracking, c.masterKey),
  (c) => verpReports(c.feedback),
  (c) => fblReports(c.feedback, c.database.db, c.config.bounceHost),
];
