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
import type { SecureContext } from 'node:tls';
import { Session } from './smtp-session.ts';

export { parseReply } from './smtp-wire.ts';

export type SmtpStage = 'connect' | 'ehlo' | 'auth' | 'mail' | 'rcpt' | 'data' | 'timeout';

export interface RecipientRejection {
  recipient: string;
  code?: number;
  enhancedCode?: string;
  response: string;
}

export type AttemptResult =
  | {
      ok: true;
      response: string;
      code?: number;
      enhancedCode?: string;
      tls: boolean;
      /** With TLS: whether the certificate verified (trusted chain, host name); null without TLS. */
      tlsVerified?: boolean | null;
      transcript: string[];
      rejectedRecipients: RecipientRejection[];
    }
  | AttemptFailure;

export interface AttemptFailure {
  ok: false;
  permanent: boolean;
  code?: number;
  enhancedCode?: string;
  response: string;
  tls: boolean;
  /** With TLS: whether the certificate verified; null without TLS (unset: not known). */
  tlsVerified?: boolean | null;
  transcript: string[];
  stage: SmtpStage;
  /**
   * Nothing of the message reached the server (the connection was gone before its data): it can
   * go out over another connection at once, without counting as an attempt.
   */
  notSent?: boolean;
}

export interface SmtpTimeouts {
  /** TCP connect; default 30 s. */
  connectMs: number;
  /** Waiting for the 220 greeting; default 120 s. */
  greetingMs: number;
  /** Each command's reply (EHLO, MAIL, RCPT, DATA, RSET) and the TLS handshake; default 120 s. */
  commandMs: number;
  /** From the 354 to the reply after the final dot; default 600 s (RFC 5321 4.5.3.2). */
  dataMs: number;
}

export const DEFAULT_SMTP_TIMEOUTS: SmtpTimeouts = {
  connectMs: 30_000,
  greetingMs: 120_000,
  commandMs: 120_000,
  dataMs: 600_000,
};

export interface SessionOptions {
  /** Host name of the MX (or relay): used for SNI and in the transcript. */
  host: string;
  /** IP address to connect to; default: `host`, resolved by the system resolver. */
  address?: string;
  /** Default 25. */
  port?: number;
  /** Our EHLO name: a FQDN or an address literal such as '[192.0.2.1]'. */
  ehloName: string;
  timeouts?: Partial<SmtpTimeouts>;
  /**
   * 'opportunistic' (default): STARTTLS when offered, plain text if it fails. 'required': TLS
   * (STARTTLS, or `secure`) or no session, never a plain-text fallback. 'none': never TLS.
   */
  tlsMode?: 'opportunistic' | 'required' | 'none';
  /** End the session when the certificate does not verify for `host` (chain and name). */
  verifyCertificate?: boolean;
  /** Trusted CAs for verification (Node's bundled roots plus POSTYARD_EXTRA_CA_FILE); default Node's. */
  secureContext?: SecureContext;
  /** Implicit TLS from the first byte (a relay on port 465); default false. */
  secure?: boolean;
  auth?: { user: string; pass: string };
  /** Local address to bind (IP pools). */
  localAddress?: string;
}

export interface OutboundMessage {
  envelopeFrom: string;
  recipients: string[];
  raw: Buffer;
}

export interface SmtpSession {
  /** Null when connect, EHLO, STARTTLS and AUTH went through; else the failure every send returns. */
  readonly connectFailure: AttemptFailure | null;
  /** The connection is up and can take another message. */
  readonly alive: boolean;
  readonly tls: boolean;
  /** With TLS: whether the certificate verified (trusted chain, host name); null without TLS. */
  readonly tlsVerified: boolean | null;
  /** STARTTLS failed and the session runs in plain text on a second connection. */
  readonly tlsFallback: boolean;
  send(message: OutboundMessage): Promise<AttemptResult>;
  close(): Promise<void>;
}

/** Opens a connection (and TLS, and AUTH); never throws: check `connectFailure`, or just send. */
export async function openSession(options: SessionOptions): Promise<SmtpSession> {
  const session = new Session(options, { ...DEFAULT_SMTP_TIMEOUTS, ...options.timeouts });
  await session.open();
  return session;
}

export { type RelayConfig, relayFromUrl } from './relay-url.ts';
