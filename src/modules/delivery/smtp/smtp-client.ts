/**
 * Outbound SMTP: one connection to one destination host (MX or relay), several messages over it.
 *
 * Design notes
 * - Our own client (smtp-session.ts, smtp-wire.ts): greeting, EHLO/HELO fallback, PIPELINING
 *   (MAIL, RCPT and DATA in one write), SIZE, 8BITMIME, SMTPUTF8, dot-stuffing, STARTTLS, AUTH
 *   for relays; results as values, per-message transcripts, timeouts per step, and TLS fallback.
 * - Results are never thrown. A failure says whether it is permanent (a 5xx reply to MAIL, RCPT
 *   or DATA, or a message the server's advertised SIZE refuses) and at which stage. Everything at
 *   connection level (refused, dropped, timeout, a 5xx greeting, AUTH) is transient for the
 *   message, as in Postfix: another MX or a later try may work.
 * - A session that failed to open is still a session: `connectFailure` says why, and every send
 *   returns that failure, so callers treat all messages alike. When `alive` turns false the caller
 *   opens a new session (or moves to the next MX); there are no hidden reconnects.
 * - TLS (docs/operations.md "Outbound TLS"), per session: 'opportunistic' (MX hosts) = STARTTLS when offered, the
 *   certificate checked and recorded but not required, one plain-text reconnect when the
 *   handshake fails; 'required' (relays, MTA-STS enforce) = TLS or nothing, and with
 *   `verifyCertificate` a certificate that does not verify ends the session before AUTH or MAIL;
 *   'none' = never. AUTH is never sent over an unencrypted connection.
 */
import { Session } from './smtp-session.ts';
import type { SessionOptions, SmtpSession, SmtpTimeouts } from './smtp-types.ts';

export type {
  AttemptFailure,
  AttemptResult,
  OutboundMessage,
  RecipientRejection,
  SessionOptions,
  SmtpSession,
  SmtpStage,
  SmtpTimeouts,
} from './smtp-types.ts';

export const DEFAULT_SMTP_TIMEOUTS: SmtpTimeouts = {
  connectMs: 30_000,
  greetingMs: 120_000,
  commandMs: 120_000,
  dataMs: 600_000,
};

/** Opens a connection (and TLS, and AUTH); never throws: check `connectFailure`, or just send. */
export async function openSession(options: SessionOptions): Promise<SmtpSession> {
  const session = new Session(options, { ...DEFAULT_SMTP_TIMEOUTS, ...options.timeouts });
  await session.open();
  return session;
}
