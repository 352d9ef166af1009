import type { AddressInfo } from 'node:net';
import type { Counter } from 'prom-client';
import type { SMTPServerOptions, SMTPServerSession } from 'smtp-server';
import type { Container } from '../container.ts';
import { inboundCounter } from '../metrics/inbound-messages.ts';
import { SubmissionServer } from './connection.ts';
import { INBOUND_RECIPIENTS } from './inbound-recipients.ts';
import { SmtpLimits } from './limits.ts';
import { sharedListenerOptions } from './listener-options.ts';
import { receiveData } from './receive-data.ts';
import type { InboundClient } from '../mail/recipient-handler.ts';
import { type AcceptedRecipient, RecipientTable, receivedMessage, recipientOf } from './recipient-table.ts';
import { reply, SmtpReply } from './replies.ts';
import { resolveTls } from './tls.ts';

/**
 * The inbound listener (role `inbound`, docs/inbound.md): receives mail for our own addresses,
 * today DSNs, ARF reports and auto-replies for the return-path domains and the List-Unsubscribe
 * mailto address. No AUTH and no relaying: what each recipient address means is the business of
 * the recipient handlers (INBOUND_RECIPIENTS, src/smtp/inbound-recipients.ts); an address none of
 * them takes gets 550 5.7.1. What every kind of inbound mail shares is kept here: the size limit,
 * the recipient limit, and the connection limits, idle timeout and progress deadline of the
 * submission server (connection.ts, limits.ts, listener-options.ts).
 */
export const INBOUND_MAX_BYTES = 10 * 1024 * 1024;
const MAX_RECIPIENTS = 50;

export interface RunningInbound {
  port: number;
  /** postyard_inbound_messages_total, by result. */
  counter: Counter<'result'>;
  close(): Promise<void>;
}

export interface InboundOptions {
  /** Default config.inboundPort; 0 picks a free port (tests). */
  port?: number;
  /** Default config.inboundHost. */
  host?: string;
}

function clientOf(session: SMTPServerSession): InboundClient {
  return { address: session.remoteAddress, heloName: session.hostNameAppearsAs, secure: session.secure };
}

export async function startInboundServer(c: Container, opts: InboundOptions = {}): Promise<RunningInbound> {
  const log = c.logger.child({ component: 'inbound' });
  const cfg = c.config;
  const table = new RecipientTable(INBOUND_RECIPIENTS.map((handler) => handler(c)));
  const counter = inboundCounter(c.metrics);
  const limits = new SmtpLimits(c);
  const tls = await resolveTls(cfg, log);
  // Recipients taken at RCPT, per transaction (smtp-server starts a new envelope object for each).
  const accepted = new WeakMap<object, AcceptedRecipient[]>();
  let server: SubmissionServer | undefined;
  const self = () => server as SubmissionServer;

  /** Each accepted recipient's handler gets the message, in RCPT order; their results answer DATA. */
  async function receive(raw: Buffer, session: SMTPServerSession): Promise<string[]> {
    const mailFrom = session.envelope.mailFrom ? session.envelope.mailFrom.address : '';
    const rcptTo = session.envelope.rcptTo.map((r) => r.address);
    const message = receivedMessage(raw, { mailFrom, rcptTo }, clientOf(session));
    const results: string[] = [];
    for (const { handler, target } of accepted.get(session.envelope) ?? []) {
      const { result, about } = await handler.receive(message, target);
      counter.inc({ result });
      if (result === 'unmatched') {
        // Never the body: it is someone else's mail.
        log.info(
          { target: handler.name, ...about, mailFrom, remote: session.remoteAddress, bytes: raw.length },
          'inbound message matched no message',
        );
      }
      results.push(result);
    }
    return results;
  }

  const options: SMTPServerOptions = {
    name: cfg.ehloName,
    banner: 'Postyard inbound (bounces and feedback reports only)',
    ...(tls ? { key: tls.key, cert: tls.cert } : {}),
    disabledCommands: tls ? ['AUTH'] : ['AUTH', 'STARTTLS'],
    authOptional: true,
    size: INBOUND_MAX_BYTES,
    maxRecipients: MAX_RECIPIENTS,
    ...sharedListenerOptions(cfg, limits),

    onMailFrom(_address, session, callback) {
      self().connectionOf(session.id)?.progress();
      callback();
    },

    onRcptTo(address, session, callback) {
      table.decide(recipientOf(address.address, clientOf(session))).then(
        (decision) => {
          if ('refused' in decision) {
            const { code, enhanced, text } = decision.refused;
            counter.inc({ result: 'refused' });
            return callback(new SmtpReply(code, enhanced, text));
          }
          const list = accepted.get(session.envelope) ?? [];
          list.push(decision.accepted);
          accepted.set(session.envelope, list);
          self().connectionOf(session.id)?.progress();
          callback();
        },
        (err: unknown) => {
          log.error({ err }, 'inbound recipient lookup failed');
          callback(reply.tempFailure());
        },
      );
    },

    onData(stream, session, callback) {
      receiveData(self(), session.id, stream, callback, async (message) => {
        if (!message) {
          counter.inc({ result: 'refused' });
          return { refused: reply.tooBig(INBOUND_MAX_BYTES) };
        }
        try {
          const results = await receive(message, session);
          return { ok: `2.0.0 Ok: ${results.join(', ')}` };
        } catch (err) {
          log.error({ err }, 'inbound message could not be processed');
          return { refused: reply.tempFailure() };
        }
      });
    },

    onClose(session: SMTPServerSession) {
      limits.closeConnection(session.id);
      self().forget(session.id);
    },
  };

  server = new SubmissionServer(options, {
    tlsForAuth: false,
    tlsAvailable: tls !== null,
    deadlineMs: cfg.smtpCommandDeadlineSeconds * 1000,
  });
  server.on('error', (err) => log.warn({ err: err.message }, 'inbound SMTP connection error'));
  const host = opts.host ?? cfg.inboundHost;
  const port = await new Promise<number>((resolve, reject) => {
    const s = self();
    s.server.once('error', reject);
    s.listen(opts.port ?? cfg.inboundPort, host, () => {
      s.server.off('error', reject);
      resolve((s.server.address() as AddressInfo).port);
    });
  });
  log.info({ host, port }, 'inbound SMTP listening (bounces and feedback reports)');
  let closing: Promise<void> | null = null;
  return {
    port,
    counter,
    close() {
      closing ??= self().shutdown();
      return closing;
    },
  };
}
