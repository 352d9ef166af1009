/**
 * The types shared by the SMTP client (smtp-client.ts), its session (smtp-session.ts) and its
 * link (smtp-link.ts): options in, result values out. Types only, so the three files depend on
 * this one rather than on each other.
 */
import type { SecureContext } from 'node:tls';

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
