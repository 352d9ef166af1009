/**
 * The SMTP session behind smtp-client.ts: one TCP (or TLS) connection to one MX or relay.
 *
 * Design notes
 * - Our own client rather than nodemailer's SMTPConnection: that one waits for the reply to MAIL
 *   before sending RCPT, and for RCPT before DATA, and writes every command and body chunk on its
 *   own through a stream pipeline. Here, when the server offers PIPELINING (RFC 2920), MAIL, every
 *   RCPT and DATA leave in one write and the dot-stuffed body plus the final dot in a second: two
 *   round trips per message instead of four, and far fewer syscalls (measured by
 *   `npm run bench:deliver`, docs/benchmarks.md). Without PIPELINING each command waits its reply.
 * - Every exchange is `await reader.next(timeout)`: a timeout, a dropped connection or a socket
 *   error rejects the wait with a WireError, which becomes a failure value. Nothing is thrown to
 *   callers; `stage` says where it ended (the command whose reply was awaited).
 * - Transcript: every command and reply line, except message bodies (one "<N bytes of message
 *   data>" line stands in) and AUTH arguments (masked). The first message on a connection carries
 *   the greeting/EHLO/STARTTLS preamble; later ones start with a "reusing connection" line.
 * - Opportunistic TLS (CONTRACT 12): STARTTLS when offered, certificate not verified; when the
 *   handshake fails we reconnect once in plain text and say so in the transcript.
 * - After a failed transaction the session sends RSET so the next message starts clean.
 */
import net from 'node:net';
import tls from 'node:tls';
import type {
  AttemptFailure,
  AttemptResult,
  OutboundMessage,
  SessionOptions,
  SmtpSession,
  SmtpStage,
  SmtpTimeouts,
} from './smtp-client.ts';
import {
  dataPayload,
  envelopeCommands,
  type Extensions,
  NO_EXTENSIONS,
  parseEhlo,
  parseReply,
  type Reply,
  ReplyReader,
  WireError,
} from './smtp-wire.ts';

export { parseReply };

interface Queued {
  message: OutboundMessage;
  resolve(result: AttemptResult): void;
  /** Its commands, when they already went out behind the previous message's data. */
  early: string[] | null;
}

/** A failure value travelling up through the dialogue as an exception (caught in one place). */
class Failed extends Error {
  constructor(readonly failure: AttemptFailure) {
    super(failure.response);
  }
}

const oneLine = (text: string) => text.replace(/\s+/g, ' ').trim();

export class Session implements SmtpSession {
  connectFailure: AttemptFailure | null = null;
  alive = false;
  tls = false;
  tlsFallback = false;

  private socket: net.Socket | tls.TLSSocket | null = null;
  private reader = new ReplyReader();
  private ext: Extensions = NO_EXTENSIONS;
  private lines: string[] = [];
  private preamble: string[] = [];
  private messages = 0;
  private stage: SmtpStage = 'connect';
  private tlsFailed = false;
  /** Messages handed to send() and not yet finished, in order; the first is on the wire. */
  private queue: Queued[] = [];
  private draining: Promise<void> | null = null;
  /** The current message's data went out (the server ends that transaction by itself). */
  private bodySent = false;

  constructor(
    private readonly o: SessionOptions,
    private readonly t: SmtpTimeouts,
  ) {}

  private get where(): string {
    return `${this.o.host} [${this.o.address ?? this.o.host}]:${this.o.port ?? 25}`;
  }

  async open(): Promise<void> {
    const plain = this.o.tlsMode === 'none' || this.o.secure === true;
    let failure = await this.attempt(() => this.connect(plain));
    if (failure && !plain && this.tlsFailed) {
      this.lines.push(`*: STARTTLS failed (${failure.response}); reconnecting without TLS`);
      this.tlsFallback = true;
      failure = await this.attempt(() => this.connect(true));
    }
    const auth = this.o.auth;
    if (!failure && auth) failure = await this.attempt(() => this.login(auth));
    this.connectFailure = failure;
    this.preamble = this.lines;
    this.lines = [];
    if (failure) this.teardown();
  }

  /** Runs a step of the dialogue; its failure (thrown as Failed or WireError) comes back as a value. */
  private async attempt(step: () => Promise<void>): Promise<AttemptFailure | null> {
    try {
      await step();
      return null;
    } catch (err) {
      return this.failureOf(err);
    }
  }

  private async connect(ignoreTLS: boolean): Promise<void> {
    this.teardown();
    this.reader = new ReplyReader();
    this.stage = 'connect';
    this.lines.push(`*: connecting to ${this.where}${this.o.secure ? ' (implicit TLS)' : ''}`);
    const socket = await this.dial();
    this.adopt(socket);
    const greeting = await this.read(this.t.greetingMs, 'the greeting');
    if (greeting.code !== 220) throw this.replyFailure(greeting, false);
    await this.ehlo();
    if (!ignoreTLS && !this.tls && this.ext.starttls) {
      this.stage = 'ehlo';
      this.write(['STARTTLS']);
      const r = await this.read(this.t.commandMs, 'the reply to STARTTLS');
      if (r.code === 220) {
        await this.startTls();
        await this.ehlo();
      } else this.lines.push('*: STARTTLS refused; going on without TLS');
    }
    const proto = this.tls ? (this.socket as tls.TLSSocket).getProtocol() : null;
    this.lines.push(`*: connected, ${this.tls ? `TLS ${proto ?? ''}`.trim() : 'no TLS'}`);
  }

  /** TCP (or implicit TLS) connection within the connect timeout. */
  private dial(): Promise<net.Socket | tls.TLSSocket> {
    const host = this.o.address ?? this.o.host;
    const port = this.o.port ?? 25;
    const local = this.o.localAddress ? { localAddress: this.o.localAddress } : {};
    return new Promise((resolve, reject) => {
      const socket = this.o.secure
        ? tls.connect({ host, port, ...local, ...this.tlsOptions() })
        : net.connect({ host, port, ...local });
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new WireError(`timeout after ${this.t.connectMs} ms connecting`, 'timeout'));
      }, this.t.connectMs);
      socket.once(this.o.secure ? 'secureConnect' : 'connect', () => {
        clearTimeout(timer);
        socket.removeListener('error', onError);
        resolve(socket);
      });
      const onError = (err: Error) => {
        clearTimeout(timer);
        reject(new WireError(oneLine(err.message), 'error'));
      };
      socket.once('error', onError);
    });
  }

  private tlsOptions(): tls.ConnectionOptions {
    return { rejectUnauthorized: false, ...(net.isIP(this.o.host) ? {} : { servername: this.o.host }) };
  }

  /** Makes `socket` the session's connection: replies go to the reader, loss of it fails reads. */
  private adopt(socket: net.Socket | tls.TLSSocket): void {
    this.socket = socket;
    // TCP_NODELAY, as MTAs do: with Nagle on, each message's small final write waits for the
    // peer's delayed ACK (~40 ms), capping a connection near 25 messages per second.
    socket.setNoDelay(true);
    this.alive = true;
    this.tls = socket instanceof tls.TLSSocket && socket.encrypted;
    const reader = this.reader;
    socket.on('data', (chunk: Buffer) => reader.push(chunk));
    socket.on('error', (err) => {
      this.lines.push(`*: ${oneLine(err.message)}`);
      reader.fail(new WireError(oneLine(err.message), 'error'));
    });
    socket.on('close', () => {
      if (this.socket === socket) this.alive = false;
      reader.fail(new WireError('connection closed by the server', 'closed'));
    });
  }

  private async startTls(): Promise<void> {
    const raw = this.socket as net.Socket;
    if (this.reader.pending) throw new WireError('the server sent data after agreeing to STARTTLS', 'protocol');
    raw.removeAllListeners('data');
    raw.removeAllListeners('error');
    raw.removeAllListeners('close');
    raw.on('error', () => {}); // the TLS socket reports it
    const secure = tls.connect({ socket: raw, ...this.tlsOptions() });
    this.socket = secure;
    try {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => {
          reject(new WireError(`timeout waiting for the TLS handshake`, 'timeout'));
        }, this.t.commandMs);
        secure.once('secureConnect', () => {
          clearTimeout(timer);
          resolve();
        });
        secure.once('error', (err) => {
          clearTimeout(timer);
          reject(new WireError(oneLine(err.message), 'error'));
        });
        secure.once('close', () => {
          clearTimeout(timer);
          reject(new WireError('connection closed during the TLS handshake', 'closed'));
        });
      });
    } catch (err) {
      this.tlsFailed = true;
      if (err instanceof WireError && err.kind === 'timeout')
        this.lines.push(`*: timeout after ${this.t.commandMs} ms waiting for the TLS handshake`);
      throw err;
    }
    secure.removeAllListeners('error');
    secure.removeAllListeners('close');
    this.adopt(secure);
  }

  private async ehlo(): Promise<void> {
    this.stage = 'ehlo';
    this.write([`EHLO ${this.o.ehloName}`]);
    let r = await this.read(this.t.commandMs, 'the reply to EHLO');
    if (r.code >= 500) {
      this.write([`HELO ${this.o.ehloName}`]);
      r = await this.read(this.t.commandMs, 'the reply to HELO');
    }
    if (r.code !== 250) throw this.replyFailure(r, false);
    this.ext = parseEhlo(r.lines);
  }

  private async login(auth: { user: string; pass: string }): Promise<void> {
    this.stage = 'auth';
    if (this.ext.auth.includes('PLAIN') || !this.ext.auth.includes('LOGIN')) {
      const token = Buffer.from(`\u0000${auth.user}\u0000${auth.pass}`).toString('base64');
      this.write([`AUTH PLAIN ${token}`], ['AUTH PLAIN ****']);
    } else {
      this.write(['AUTH LOGIN'], ['AUTH LOGIN ****']);
      for (const part of [auth.user, auth.pass]) {
        const r = await this.read(this.t.commandMs, 'the reply to AUTH');
        if (r.code !== 334) throw this.replyFailure(r, false);
        this.write([Buffer.from(part).toString('base64')], ['****']);
      }
    }
    const r = await this.read(this.t.commandMs, 'the reply to AUTH');
    if (r.code !== 235) throw this.replyFailure(r, false);
  }

  send(message: OutboundMessage): Promise<AttemptResult> {
    return new Promise((resolve) => {
      this.queue.push({ message, resolve, early: null });
      this.draining ??= this.drain();
    });
  }

  private async drain(): Promise<void> {
    for (let q = this.queue[0]; q; q = this.queue[0]) {
      const result = await this.sendNow(q);
      this.queue.shift();
      q.resolve(result);
    }
    this.draining = null;
  }

  private async sendNow(q: Queued): Promise<AttemptResult> {
    if (this.connectFailure) return { ...this.connectFailure, transcript: [...this.preamble] };
    if (!this.alive || !this.socket) {
      // Nothing of this message reached the server (at most its envelope, without data).
      const transcript = [`*: connection to ${this.where} is closed`];
      const response = 'connection is closed';
      return { ok: false, permanent: false, stage: 'connect', response, tls: this.tls, transcript, notSent: true };
    }
    this.messages++;
    this.lines =
      this.messages === 1
        ? [...this.preamble]
        : [`*: reusing connection to ${this.where} (message ${this.messages}, ${this.tls ? 'TLS' : 'no TLS'})`];
    if (q.early) this.lines.push(...q.early.map((c) => `C: ${c}`));
    this.bodySent = false;
    let result: AttemptResult;
    try {
      result = await this.transaction(q);
    } catch (err) {
      result = this.failureOf(err);
    }
    // After its data the server has closed the transaction itself; before, RSET starts clean.
    if (!result.ok && this.alive && !this.bodySent) await this.reset();
    return { ...result, transcript: [...this.lines] };
  }

  /** One mail transaction; throws Failed / WireError for anything but delivery. */
  private async transaction(q: Queued): Promise<AttemptResult> {
    const { recipients, raw } = q.message;
    this.stage = 'mail';
    let commands = q.early;
    if (!commands) {
      const envelope = envelopeCommands(q.message, this.ext);
      if (!envelope.ok) throw this.localRefusal(envelope.why);
      commands = envelope.commands;
      if (this.ext.pipelining) this.write(commands);
    }
    const replies: Reply[] = [];
    const stages: SmtpStage[] = ['mail', ...recipients.map(() => 'rcpt' as const), 'data'];
    for (let i = 0; i < commands.length; i++) {
      const command = commands[i] as string;
      if (!this.ext.pipelining) {
        // Without pipelining there is no point going on once MAIL is refused or nobody is accepted.
        if (i > 0 && (replies[0]?.code ?? 0) >= 400) break;
        if (command === 'DATA' && replies.slice(1).every((r) => r.code >= 400)) break;
        this.write([command]);
      }
      this.stage = stages[i] as SmtpStage;
      replies.push(await this.read(this.t.commandMs, `the reply to ${command.split(':')[0]}`));
    }
    const mailReply = replies[0] as Reply;
    const rcptReplies = replies.slice(1, recipients.length + 1);
    const dataReply = replies[recipients.length + 1];
    const accepted = rcptReplies.filter((r) => r.code < 300);
    if (dataReply?.code === 354 && (mailReply.code >= 300 || accepted.length === 0)) {
      // The server opened DATA although the envelope failed: close it empty (RFC 2920 3.1).
      this.write(['.'], ['<empty message data>']);
      await this.read(this.t.dataMs, 'the reply to the end of data');
    }
    if (mailReply.code >= 300) throw this.replyFailure(mailReply, true, 'mail');
    if (accepted.length === 0) {
      // Every recipient refused: report a temporary refusal if there is one (worth retrying).
      const worst = rcptReplies.find((r) => r.code < 500) ?? (rcptReplies[0] as Reply);
      throw this.replyFailure(worst, true, 'rcpt');
    }
    if (dataReply?.code !== 354) throw this.replyFailure(dataReply as Reply, true, 'data');
    this.lines.push(`C: <${raw.length} bytes of message data>`);
    this.stage = 'data';
    this.bodySent = true;
    this.writeData([...dataPayload(raw), ...this.envelopeOfNext()]);
    const final = await this.read(this.t.dataMs, 'the reply to the end of data');
    if (final.code >= 300) throw this.replyFailure(final, true, 'data');
    return {
      ok: true,
      response: final.text,
      ...parseReply(final.text),
      tls: this.tls,
      transcript: this.lines,
      rejectedRecipients: rcptReplies.flatMap((r, i) =>
        r.code < 300 ? [] : [{ recipient: recipients[i] as string, response: r.text, ...parseReply(r.text) }],
      ),
    };
  }

  /**
   * RFC 2920 allows message data to start a command group: when the next message is already
   * waiting, its MAIL, RCPT and DATA follow this body in the same write, so it costs one round
   * trip instead of two. Its replies are read, in order, when its turn comes.
   */
  private envelopeOfNext(): Buffer[] {
    const next = this.queue[1];
    if (!this.ext.pipelining || !next || next.early) return [];
    const envelope = envelopeCommands(next.message, this.ext);
    if (!envelope.ok) return [];
    next.early = envelope.commands;
    return [Buffer.from(`${envelope.commands.join('\r\n')}\r\n`)];
  }

  /** RSET after a failed transaction; a session that cannot reset is closed. */
  private async reset(): Promise<void> {
    this.write(['RSET']);
    try {
      const r = await this.read(this.t.commandMs, 'the reply to RSET');
      if (r.code !== 250) this.teardown();
    } catch {
      this.teardown();
    }
  }

  async close(): Promise<void> {
    await this.draining;
    const socket = this.socket;
    if (!socket) return;
    if (this.alive) {
      this.write(['QUIT']);
      await Promise.race([
        this.reader.next(2000, 'the reply to QUIT').catch(() => undefined),
        new Promise((r) => socket.once('close', r)),
      ]);
    }
    this.teardown();
  }

  // ---- helpers ----------------------------------------------------------------------------

  /** Writes commands in one packet; `shown` replaces them in the transcript (masking). */
  private write(commands: string[], shown: string[] = commands): void {
    for (const c of shown) this.lines.push(`C: ${c}`);
    this.socket?.write(`${commands.join('\r\n')}\r\n`);
  }

  private writeData(chunks: Buffer[]): void {
    const socket = this.socket;
    if (!socket) return;
    socket.cork();
    for (const c of chunks) socket.write(c);
    socket.uncork();
  }

  private async read(timeoutMs: number, what: string): Promise<Reply> {
    try {
      const r = await this.reader.next(timeoutMs, what);
      for (const line of r.lines) this.lines.push(`S: ${line}`);
      return r;
    } catch (err) {
      if (err instanceof WireError && err.kind === 'timeout') {
        this.lines.push(`*: timeout after ${timeoutMs} ms waiting for ${what}`);
        this.teardown();
      }
      throw err;
    }
  }

  /** A reply that ends the exchange; only a 5xx inside a mail transaction is permanent. */
  private replyFailure(r: Reply, inTransaction: boolean, stage: SmtpStage = this.stage): Failed {
    return new Failed({
      ok: false,
      permanent: inTransaction && r.code >= 500,
      stage,
      response: r.text,
      ...parseReply(r.text),
      tls: this.tls,
      transcript: this.lines,
    });
  }

  /** Refused here, before anything of the transaction was sent: permanent (sending again cannot help). */
  private localRefusal(why: string): Failed {
    this.lines.push(`*: not sent: ${why}`);
    return new Failed({
      ok: false,
      permanent: true,
      stage: 'mail',
      response: why,
      tls: this.tls,
      transcript: this.lines,
    });
  }

  private failureOf(err: unknown): AttemptFailure {
    if (err instanceof Failed) return err.failure;
    const wire = err instanceof WireError ? err : new WireError(oneLine(String(err)), 'error');
    if (wire.kind !== 'timeout' && wire.kind !== 'closed' && !this.lines.at(-1)?.includes(wire.message)) {
      this.lines.push(`*: ${wire.message}`);
    }
    if (wire.kind !== 'timeout') this.teardown();
    return {
      ok: false,
      permanent: false,
      stage: wire.kind === 'timeout' ? 'timeout' : this.stage,
      response: wire.message,
      tls: this.tls,
      transcript: this.lines,
    };
  }

  private teardown(): void {
    this.alive = false;
    const socket = this.socket;
    this.socket = null;
    socket?.destroy();
  }
}
