/**
 * What one kind of recipient address means to the inbound listener (src/smtp/inbound-listener.ts),
 * like a row of KumoMTA's `listener_domains`: a handler claims the addresses it knows at RCPT TO
 * and receives the message for each of them after DATA. Handlers are listed once, in
 * INBOUND_RECIPIENTS (src/smtp/inbound-recipients.ts), and asked in that order; the first that
 * answers decides, and an address none of them takes is refused `550 5.7.1` (never an open relay).
 *
 * The listener keeps what every kind of inbound mail shares: no AUTH, the message size limit, the
 * idle timeout and progress deadline, the per-address connection limit, the count of each result
 * in `postyard_inbound_messages_total` and the log line of mail that matched nothing. A handler
 * sees only its own recipients and never writes SMTP replies itself beyond its refusals.
 */

/** Who is sending, as the listener saw it. */
export interface InboundClient {
  /** The client's IP address (from the PROXY header when behind a load balancer). */
  address: string;
  /** The name it gave in EHLO/HELO, unverified. */
  heloName: string;
  /** The session is encrypted (STARTTLS). */
  secure: boolean;
}

/** An address given in RCPT TO. */
export interface InboundRecipient {
  /** As the client wrote it: a token in the local part may be case-sensitive. */
  address: string;
  /** Lower case: the part before the last `@` and the part after it ('' both when there is none). */
  local: string;
  domain: string;
  client: InboundClient;
}

/** An SMTP refusal: the reply code, its enhanced status code (RFC 3463) and the text. */
export interface InboundRefusal {
  code: number;
  enhanced: string;
  text: string;
}

/**
 * A handler's answer for an address it claims: accept it (`accept` is handed back with the
 * message after DATA, e.g. the verified message id of a token), or refuse it with its own reply
 * (e.g. `550 5.1.1` for an address of a known domain that no route takes).
 */
export type RecipientDecision<Target> = { accept: Target } | { refuse: InboundRefusal };

/** A message received for accepted recipients, within the listener's size limit. */
export interface ReceivedMessage {
  /** The message as received (at most the listener's size limit). */
  raw: Buffer;
  envelope: {
    /** MAIL FROM ('' for the null sender of DSNs). */
    mailFrom: string;
    /** Every accepted recipient, whichever handler took it. */
    rcptTo: string[];
  };
  client: InboundClient;
  /**
   * `reader(raw)`, run once per message however many recipients ask for it (a DSN sent to two
   * of our addresses is parsed once). Inbound mail comes from anyone, unauthenticated: a reader
   * must be one pass over its input with bounded output (as src/modules/feedback/mime-walk.ts is).
   */
  read<Result>(reader: (raw: Buffer) => Promise<Result>): Promise<Result>;
}

/** What a handler did with the message for one recipient. */
export interface Received {
  /**
   * Counted in `postyard_inbound_messages_total{result}` and listed in the 250 reply.
   * `unmatched` (nothing of ours was concerned) is also logged, without the content.
   */
  result: string;
  /** More fields for that log line (e.g. what kind of report it was); never the content. */
  about?: Record<string, string | number>;
}

export interface RecipientHandler<Target = unknown> {
  /** Names the handler in log lines (`target`). */
  readonly name: string;
  /**
   * At RCPT TO: null when the address is not one of this handler's (the next handler is asked),
   * else the decision. May be async (a database lookup); a rejection is answered `451 4.3.0`.
   */
  match(recipient: InboundRecipient): RecipientDecision<Target> | null | Promise<RecipientDecision<Target> | null>;
  /**
   * After DATA, once for each recipient this handler accepted, in RCPT order; resolves when what
   * the message does is durable (the 250 follows). A rejection is answered `451 4.3.0`, so the
   * sender retries.
   */
  receive(message: ReceivedMessage, target: Target): Promise<Received>;
}
