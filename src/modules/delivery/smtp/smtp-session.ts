/**
 * The SMTP session behind smtp-client.ts: mail transactions over one connection (smtp-link.ts).
 *
 * Design notes
 * - Our own client rather than nodemailer's SMTPConnection: that one waits for the reply to MAIL
 *   before sending RCPT, and for RCPT before DATA, and writes every command and body chunk on its
 *   own through a stream pipeline. Here, when the server offers PIPELINING (RFC 2920), MAIL, every
 *   RCPT and DATA leave in one write, and the dot-stuffed body, the final dot and the next
 *   message's envelope (when one waits in the queue) in a second: one round trip per message
 *   instead of four (measured by `npm run bench:deliver`, docs/benchmarks.md). Without
 *   PIPELINING each command waits for its reply.
 * - send() queues; messages go out in order. A message whose connection ended before its data
 *   comes back as `notSent` (at most its envelope left), so the caller can resend it elsewhere.
 * - Every exchange is `await reader.next(timeout)`: a timeout, a dropped connection or a socket
 *   error rejects the wait with a WireError, which becomes a failure value. Nothing is thrown to
 *   callers; `stage` says where it ended (the command whose reply was awaited).
 * - The first message on a connection carries the greeting/EHLO/STARTTLS preamble in its
 *   transcript; later ones start with a "reusing connection" line.
 * - A transaction that failed before its data is followed by RSET so the next starts clean; after
 *   the data the server has ended the transaction itself (and the next may already be under way).
 */
import type { AttemptFailure, AttemptResult, OutboundMessage, SmtpSession, SmtpStage } from './smtp-types.ts';
import { dataPayload, envelopeCommands, parseReply, type Reply } from './smtp-wire.ts';
import { SmtpLink } from './smtp-link.ts';

interface Queued {
  message: OutboundMessage;
  resolve(result: AttemptResult): void;
  /** Its commands, when they already went out behind the previous message's data. */
  early: string[] | null;
}

export class Session extends SmtpLink implements SmtpSession {
  connectFailure: AttemptFailure | null = null;
  tlsFallback = false;

  private preamble: string[] = [];
  private messages = 0;
  /** Messages handed to send() and not yet finished, in order; the first is on the wire. */
  private queue: Queued[] = [];
  private draining: Promise<void> | null = null;
  /** The current message's data went out (the server ends that transaction by itself). */
  private bodySent = false;

  async open(): Promise<void> {
    const plain = this.o.tlsMode === 'none';
    let failure = await this.attempt(() => this.connect(plain));
    // Only opportunistic TLS falls back to plain text; 'required' (relays, MTA-STS) never does.
    const opportunistic = (this.o.tlsMode ?? 'opportunistic') === 'opportunistic' && this.o.secure !== true;
    if (failure && opportunistic && this.tlsFailed) {
      this.lines.push(`*: STARTTLS failed (${failure.response}); reconnecting without TLS`);
      this.tlsFallback = true;
      failure = await this.attempt(() => this.connect(true));
    }
    const auth = this.o.auth;
    if (!failure && auth) failure = await this.attempt(() => this.login(auth));
    this.connectFailure = failure && { ...failure, tlsVerified: this.tlsVerified };
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

  send(message: OutboundMessage): Promise<AttemptResult> {
    return new Promise((resolve) => {
      this.queue.push({ message, resolve, early: null });
      this.draining ??= this.drain();
    });
  }

  private async drain(): Promise<void> {
    for (let q = this.queue[0]; q; q = this.queue[0]) {
      let result: AttemptResult;
      try {
        result = await this.sendNow(q);
      } catch (err) {
        // A bug must not leave the queue (and the lane awaiting it) stuck: fail this message.
        result = { ...this.failureOf(err), transcript: [...this.lines] };
      }
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
      const tlsVerified = this.tlsVerified;
      return {
        ok: false,
        permanent: false,
        stage: 'connect',
        response,
        tls: this.tls,
        tlsVerified,
        transcript,
        notSent: true,
      };
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
    return { ...result, tlsVerified: this.tlsVerified, transcript: [...this.lines] };
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
}
