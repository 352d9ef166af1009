/**
 * The SMTP session behind smtp-client.ts: one nodemailer SMTPConnection, watched.
 *
 * Design notes
 * - Transcript: SMTPConnection's transactionLog hands every command and reply to our logger.
 *   Message bodies never appear (one "<N bytes of message data>" line stands in); AUTH arguments
 *   and the exchange that follows are masked. The first message on a connection carries the
 *   greeting/EHLO/STARTTLS preamble; later ones start with a "reusing connection" line.
 * - Timeouts: connect and greeting are SMTPConnection's own. For every command a watchdog is armed
 *   when the command is written and cleared on its reply; from the 354 to the final reply the
 *   longer data timeout applies. A timeout destroys the socket.
 * - Every exchange runs through run(): it settles once, from the library callback or from a
 *   timeout, error or closed connection, whichever comes first. Events of a connection we gave up
 *   on (before the TLS fallback) are ignored by generation number.
 * - After a failed transaction the session sends RSET so the next message starts clean.
 */
import net from 'node:net';
import SMTPConnection from 'nodemailer/lib/smtp-connection/index.js';
import type {
  AttemptFailure,
  AttemptResult,
  OutboundMessage,
  SessionOptions,
  SmtpSession,
  SmtpStage,
  SmtpTimeouts,
} from './smtp-client.ts';

type NmError = SMTPConnection.SMTPError & { rejectedErrors?: SMTPConnection.SMTPError[] };

const REPLY_RE = /^(\d{3})(?:[ -]([245]\.\d{1,3}\.\d{1,3})\b)?/;

/** Splits '550 5.1.1 No such user' into code and enhanced code (last line of a multi-line reply). */
export function parseReply(reply: string): { code?: number; enhancedCode?: string } {
  const last = reply.trim().split(/\r?\n/).pop() ?? '';
  const m = REPLY_RE.exec(last);
  if (!m) return {};
  return m[2] ? { code: Number(m[1]), enhancedCode: m[2] } : { code: Number(m[1]) };
}

const noop = () => {};
const SILENT = { level: noop, trace: noop, info: noop, warn: noop, error: noop, fatal: noop };

const oneLine = (text: string) => text.replace(/\s+/g, ' ').trim();

const COMMAND_STAGE: Record<string, SmtpStage> = {
  EHLO: 'ehlo',
  HELO: 'ehlo',
  STARTTLS: 'ehlo',
  AUTH: 'auth',
  'MAIL FROM': 'mail',
  'RCPT TO': 'rcpt',
  DATA: 'data',
};

export class Session implements SmtpSession {
  connectFailure: AttemptFailure | null = null;
  alive = false;
  tls = false;
  tlsFallback = false;

  private conn: SMTPConnection | null = null;
  private generation = 0;
  private lines: string[] = [];
  private preamble: string[] | null = null;
  private messages = 0;
  private stage: SmtpStage = 'connect';
  private outstanding = 0;
  private authExchange = false;
  private lastCommand = '';
  private currentSize = 0;
  /** Between a 2xx reply to STARTTLS and the next command: the handshake is under way. */
  private handshaking = false;
  private tlsFailed = false;
  private timer: NodeJS.Timeout | undefined;
  private abort: ((f: AttemptFailure) => void) | null = null;
  private chain: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly o: SessionOptions,
    private readonly t: SmtpTimeouts,
  ) {}

  private get where(): string {
    return `${this.o.host} [${this.o.address ?? this.o.host}]:${this.o.port ?? 25}`;
  }

  async open(): Promise<void> {
    const plain = this.o.tlsMode === 'none' || this.o.secure === true;
    let failure = await this.connect(plain);
    if (failure && !plain && this.tlsFailed) {
      this.lines.push(`*: STARTTLS failed (${failure.response}); reconnecting without TLS`);
      this.tlsFallback = true;
      failure = await this.connect(true);
    }
    if (!failure && this.o.auth) failure = await this.login(this.o.auth);
    this.connectFailure = failure;
    this.preamble = this.lines;
    this.lines = [];
    if (failure) this.teardown();
  }

  private connect(ignoreTLS: boolean): Promise<AttemptFailure | null> {
    const gen = ++this.generation;
    this.stage = 'connect';
    this.lines.push(`*: connecting to ${this.where}${this.o.secure ? ' (implicit TLS)' : ''}`);
    // Events from a connection we already gave up on (before the TLS fallback) are ignored.
    const own =
      <A extends unknown[]>(fn: (...a: A) => void) =>
      (...a: A): void => {
        if (gen === this.generation) fn(...a);
      };
    const sni = net.isIP(this.o.host) ? {} : { servername: this.o.host };
    const conn = new SMTPConnection({
      host: this.o.address ?? this.o.host,
      port: this.o.port ?? 25,
      secure: this.o.secure ?? false,
      name: this.o.ehloName,
      localAddress: this.o.localAddress,
      ignoreTLS,
      opportunisticTLS: true,
      tls: { rejectUnauthorized: false, ...sni },
      connectionTimeout: this.t.connectMs,
      greetingTimeout: this.t.greetingMs,
      // Backstop only: the watchdog below enforces the per-step limits.
      socketTimeout: Math.max(this.t.commandMs, this.t.dataMs) + 5000,
      transactionLog: true,
      logger: {
        ...SILENT,
        debug: own((entry: { tnx?: string }, message: unknown) => {
          if (entry?.tnx === 'client') this.onCommand(String(message));
          else if (entry?.tnx === 'server') this.onReply(String(message));
        }),
      },
      ...sni,
    });
    this.conn = conn;
    const onError = own((err: NmError) => this.onError(err));
    const onEnd = own(() => this.onEnd());
    conn.on('error', onError).on('end', onEnd);
    return this.exchange<AttemptFailure | null>((done) => {
      conn.connect(() => {
        // TCP_NODELAY, as MTAs do: with Nagle on, each message's small final writes wait for the
        // peer's delayed ACK (~40 ms), capping a connection near 25 messages per second.
        const sock = conn._socket as {
          setNoDelay?: (v: boolean) => void;
          _parent?: { setNoDelay?: (v: boolean) => void };
        };
        sock?.setNoDelay?.(true);
        sock?._parent?.setNoDelay?.(true);
        this.alive = true;
        this.tls = conn.secure;
        const proto = conn.secure ? (conn._socket as { getProtocol?: () => string | null }).getProtocol?.() : null;
        this.lines.push(`*: connected, ${conn.secure ? `TLS ${proto ?? ''}`.trim() : 'no TLS'}`);
        done(null);
      });
    });
  }

  private login(auth: { user: string; pass: string }): Promise<AttemptFailure | null> {
    this.stage = 'auth';
    return this.exchange<AttemptFailure | null>((done) => {
      this.conn?.login({ user: auth.user, pass: auth.pass }, (err) => {
        done(err ? this.failure(err as NmError, 'auth', false) : null);
      });
    });
  }

  send(message: OutboundMessage): Promise<AttemptResult> {
    const next = this.chain.then(() => this.sendNow(message));
    this.chain = next.catch(() => undefined);
    return next;
  }

  private async sendNow(message: OutboundMessage): Promise<AttemptResult> {
    if (this.connectFailure) return { ...this.connectFailure, transcript: [...(this.preamble ?? [])] };
    const conn = this.conn;
    if (!this.alive || !conn) {
      const transcript = [`*: connection to ${this.where} is closed`];
      return {
        ok: false,
        permanent: false,
        stage: 'connect',
        response: 'connection is closed',
        tls: this.tls,
        transcript,
      };
    }
    this.messages++;
    this.lines =
      this.messages === 1 && this.preamble
        ? [...this.preamble]
        : [`*: reusing connection to ${this.where} (message ${this.messages}, ${this.tls ? 'TLS' : 'no TLS'})`];
    this.stage = 'mail';
    this.currentSize = message.raw.length;
    const envelope: SMTPConnection.Envelope = {
      from: message.envelopeFrom,
      to: message.recipients,
      size: message.raw.length,
      use8BitMime: /[\x80-\xff]/.test(message.raw.toString('latin1')),
    };
    const result = await this.exchange<AttemptResult>((done) => {
      conn.send(envelope, message.raw, (err, info) => {
        if (err) return done(this.failure(err as NmError, this.stageOf(err), true));
        const rejectedRecipients = (info.rejectedErrors ?? []).map((e) => ({
          recipient: (e as { recipient?: string }).recipient ?? '',
          response: e.response ?? e.message,
          ...parseReply(e.response ?? ''),
        }));
        const reply = parseReply(info.response);
        done({
          ok: true,
          response: info.response,
          ...reply,
          tls: this.tls,
          transcript: this.lines,
          rejectedRecipients,
        });
      });
    });
    if (!result.ok && this.alive) await this.reset();
    return { ...result, transcript: [...this.lines] };
  }

  /** RSET after a failed transaction; a session that cannot reset is closed. */
  private async reset(): Promise<void> {
    const conn = this.conn;
    if (!conn) return;
    const failed = await this.run<boolean>(
      (done) => conn.reset((err) => done(!!err)),
      () => true,
    );
    if (failed) this.teardown();
  }

  async close(): Promise<void> {
    await this.chain;
    const conn = this.conn;
    if (!conn) return;
    if (this.alive) {
      await new Promise<void>((resolve) => {
        const force = setTimeout(() => resolve(), 2000);
        conn.once('end', () => {
          clearTimeout(force);
          resolve();
        });
        conn.quit();
      });
    }
    this.teardown();
  }

  /** An exchange whose abort value is the failure itself. */
  private exchange<T>(start: (done: (v: T | AttemptFailure) => void) => void): Promise<T | AttemptFailure> {
    return this.run<T | AttemptFailure>(start, (f) => f);
  }

  /** Runs one exchange; a timeout, error or lost connection aborts it with a failure value. */
  private run<T>(start: (done: (v: T) => void) => void, onAbort: (f: AttemptFailure) => T): Promise<T> {
    return new Promise<T>((resolve) => {
      let settled = false;
      const done = (v: T) => {
        if (settled) return;
        settled = true;
        this.abort = null;
        this.disarm();
        resolve(v);
      };
      this.abort = (f) => done(onAbort(f));
      start(done);
    });
  }

  private onCommand(line: string): void {
    const verb = /^(MAIL FROM|RCPT TO|[A-Z]+)/i.exec(line)?.[1]?.toUpperCase() ?? '';
    if (verb === 'AUTH') {
      this.authExchange = true;
      this.lines.push(`C: ${line.split(' ').slice(0, 2).join(' ')} ****`);
    } else {
      this.lines.push(this.authExchange ? 'C: ****' : `C: ${line}`);
    }
    if (!this.authExchange || verb === 'AUTH') this.lastCommand = verb;
    const stage = COMMAND_STAGE[verb];
    if (stage) this.stage = stage;
    this.handshaking = false;
    this.outstanding++;
    this.arm(this.t.commandMs, `the reply to ${this.lastCommand || 'a command'}`);
  }

  private onReply(reply: string): void {
    for (const line of reply.split(/\r?\n/)) this.lines.push(`S: ${line}`);
    if (this.authExchange && !reply.startsWith('334')) this.authExchange = false;
    this.outstanding = Math.max(0, this.outstanding - 1);
    if (reply.startsWith('354')) {
      this.lines.push(`C: <${this.currentSize} bytes of message data>`);
      this.arm(this.t.dataMs, 'the reply to the end of data');
    } else if (this.lastCommand === 'STARTTLS' && reply.startsWith('2')) {
      this.handshaking = true;
      this.arm(this.t.commandMs, 'the TLS handshake');
    } else if (this.outstanding > 0) {
      this.arm(this.t.commandMs, `the reply to ${this.lastCommand}`);
    } else {
      this.disarm();
    }
  }

  private arm(ms: number, what: string): void {
    this.disarm();
    this.timer = setTimeout(() => {
      this.lines.push(`*: timeout after ${ms} ms waiting for ${what}`);
      if (this.handshaking) this.tlsFailed = true;
      // Abort first: tearing down emits 'end', which must not win with a vaguer failure.
      this.abort?.(this.transient('timeout', `timeout waiting for ${what}`));
      this.teardown();
    }, ms);
  }

  private disarm(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private onError(err: NmError): void {
    if (this.handshaking) this.tlsFailed = true;
    this.lines.push(`*: ${oneLine(err.message)}`);
    const stage: SmtpStage = err.code === 'ETIMEDOUT' ? 'timeout' : this.stage;
    this.alive = false;
    this.abort?.(this.failure(err, stage, false));
  }

  private onEnd(): void {
    this.alive = false;
    this.disarm();
    this.abort?.(this.transient(this.stage, 'connection closed by the server'));
  }

  private transient(stage: SmtpStage, response: string): AttemptFailure {
    return { ok: false, permanent: false, stage, response, tls: this.tls, transcript: this.lines };
  }

  private stageOf(err: NmError): SmtpStage {
    return COMMAND_STAGE[err.command ?? ''] ?? (err.code === 'ETIMEDOUT' ? 'timeout' : this.stage);
  }

  /** Builds a failure value; only a 5xx reply in a mail transaction is permanent. */
  private failure(err: NmError, stage: SmtpStage, inTransaction: boolean): AttemptFailure {
    const response = err.response ?? oneLine(err.message);
    const reply = err.response ? parseReply(err.response) : {};
    // Refused before anything was sent (bad address syntax, over the advertised SIZE): permanent too.
    const localRefusal = inTransaction && !err.response && (err.code === 'EENVELOPE' || err.code === 'EMESSAGE');
    const permanent = (inTransaction && (reply.code ?? 0) >= 500) || localRefusal;
    return { ok: false, permanent, stage, response, ...reply, tls: this.tls, transcript: this.lines };
  }

  private teardown(): void {
    this.disarm();
    this.alive = false;
    const conn = this.conn;
    if (!conn) return;
    (conn._socket as { destroy?: () => void } | undefined)?.destroy?.();
    conn.close();
  }
}
