import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { databaseFault } from '../db/faults.ts';
import { AppError } from '../lib/errors.ts';
import { countDatabaseFault } from '../metrics/database-faults.ts';

/**
 * An SMTP reply to send instead of the default one. smtp-server reads `responseCode` from errors
 * passed to handler callbacks; the message starts with our own enhanced status code (RFC 3463),
 * which SubmissionConnection.send keeps as is.
 */
export class SmtpReply extends Error {
  readonly responseCode: number;

  constructor(code: number, enhanced: string, text: string) {
    // Replies are one line: a control character in client-provided text must not split them.
    // biome-ignore lint/suspicious/noControlCharactersInRegex: removing them is the point
    super(`${enhanced} ${text.replace(/[\u0000-\u001f\u007f]+/g, ' ')}`);
    this.name = 'SmtpReply';
    this.responseCode = code;
  }
}

export const reply = {
  malformed: (text: string) => new SmtpReply(550, '5.6.0', text),
  badSender: (text: string) => new SmtpReply(553, '5.1.7', text),
  /** Refused by policy (e.g. a sender identity the account may not use). */
  policy: (text: string) => new SmtpReply(550, '5.7.1', text),
  badRecipient: (text: string) => new SmtpReply(553, '5.1.3', text),
  tooBig: (limit: number) => new SmtpReply(552, '5.3.4', `Message size exceeds the limit of ${limit} bytes`),
  rateLimited: (text: string) => new SmtpReply(451, '4.7.1', text),
  tooManyConnections: (text: string) => new SmtpReply(421, '4.7.0', text),
  tempFailure: (text = 'Temporary local problem, please try again later') => new SmtpReply(451, '4.3.0', text),
  /** RFC 5321 452 / RFC 3463 4.3.1 "mail system full": temporary, the client keeps the message. */
  storageFull: () => new SmtpReply(452, '4.3.1', 'Insufficient system storage, please try again later'),
  /** RFC 5321 2.3.8 / RFC 5322 2.1: NUL is never allowed in a message; relaying it is unsafe. */
  nulByte: () => new SmtpReply(554, '5.6.0', 'Message contains a NUL byte, which mail may not carry'),
  /** Raw UTF-8 headers need SMTPUTF8 (RFC 6532), which is not offered here. */
  nonAsciiHeader: () =>
    new SmtpReply(
      554,
      '5.6.7',
      'Header contains non-ASCII bytes; encode them as RFC 2047 encoded words (SMTPUTF8 is not offered)',
    ),
};

/**
 * How the HTTP error codes of the shared services read over SMTP (docs/smtp.md lists them). A
 * database fault (src/db/faults.ts) is a temporary reply, counted in `metrics`: 451 4.3.0 while
 * the database is unreachable, 452 4.3.1 when it is full.
 */
export function toSmtpReply(err: unknown, log: Logger, metrics?: Registry): SmtpReply {
  if (err instanceof SmtpReply) return err;
  if (err instanceof AppError) {
    const text = err.details
      .map((d) => (d.field ? `${d.field}: ${d.message}` : d.message))
      .join('; ')
      .slice(0, 400);
    switch (err.code) {
      case 'validation_failed':
      case 'invalid_idempotency_key':
      case 'invalid_parameter':
        return reply.malformed(text);
      case 'idempotency_key_reused':
        return reply.malformed('X-Postyard-Options: this idempotency_key was already used for a different message');
      case 'sender_domain_not_verified':
        return new SmtpReply(550, '5.7.1', text);
      case 'payload_too_large':
        return new SmtpReply(552, '5.3.4', text);
      case 'rate_limited':
        return reply.rateLimited(text);
      case 'idempotency_in_progress':
        return reply.tempFailure('A message with this idempotency_key is still being processed, try again shortly');
      default:
        break;
    }
  }
  const fault = databaseFault(err);
  if (fault) {
    log.warn({ err: { message: (err as Error)?.message, code: (err as { code?: unknown })?.code } }, 'database fault');
    if (metrics) countDatabaseFault(metrics, fault, 'smtp');
    return fault === 'storage_full'
      ? reply.storageFull()
      : reply.tempFailure('Temporary local problem: the database is unreachable, please try again later');
  }
  log.error({ err }, 'SMTP submission failed');
  return reply.tempFailure();
}
