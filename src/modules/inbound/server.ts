import type { AddressInfo } from 'node:net';
import type { SMTPServerOptions, SMTPServerSession } from 'smtp-server';
import type { Container } from '../../container.ts';
import { SubmissionServer } from '../../smtp/connection.ts';
import { SmtpLimits } from '../../smtp/limits.ts';
import { sharedListenerOptions } from '../../smtp/listener-options.ts';
import { reply, SmtpReply } from '../../smtp/replies.ts';
import { receiveData } from '../../smtp/receive-data.ts';
import { resolveTls } from '../../smtp/tls.ts';
import { type InboundResult, InboundService, type InboundTarget } from './inbound.service.ts';
import { VerpSigner, verpTokenOf } from '../outcomes/verp.ts';
import { deriveTokenKey, verifyToken } from '../tracking/token.ts';
import { TrackingService } from '../tracking/tracking.service.ts';

/**
 * The inbound listener (role `inbound`, docs/inbound.md): receives DSNs, ARF reports and
 * auto-replies for the return-path domains. No AUTH and no relaying: RCPT TO is accepted only
 * for `bounces+<signed token>@<any domain>`, `fbl@<a return-path domain>` and
 * `unsubscribe+<signed tracking token>@<any domain>` (List-Unsubscribe mailto); everything else
 * gets 550 5.7.1. Connection limits, idle timeout and progress deadline are the submission
 * server's (src/smtp/connection.ts, src/smtp/limits.ts).
 */
export const INBOUND_MAX_BYTES = 10 * 1024 * 1024;
const MAX_RECIPIENTS = 50;

export interface RunningInbound {
  port: number;
  service: InboundService;
  close(): Promise<void>;
}

export interface InboundOptions {
  /** Default config.inboundPort; 0 picks a free port (tests). */
  port?: number;
  /** Default config.inboundHost. */
  host?: string;
}

const refuse = () =>
  new SmtpReply(550, '5.7.1', 'Relaying denied: this server accepts only bounces and feedback reports');

/** The tenants owning `domain` as a return-path domain ([] = none); null for the shared bounce host. */
async function fblTenants(c: Container, domain: string): Promise<string[] | null | undefined> {
  if (domain === c.config.bounceHost) return null;
  const rows = await c.database.db
    .selectFrom('sending_domains')
    .select('tenant_id')
    .where('return_path_domain', '=', domain)
    .execute();
  return rows.length ? [...new Set(rows.map((r) => r.tenant_id))] : undefined;
}

export async function startInboundServer(c: Container, opts: InboundOptions = {}): Promise<RunningInbound> {
  const log = c.logger.child({ component: 'inbound' });
  const cfg = c.config;
  const verp = new VerpSigner(c.masterKey);
  const tracking = new TrackingService(c.groupCommit, c.suppressions);
  const trackingKey = deriveTokenKey(c.masterKey);
  const service = new InboundService(c.groupCommit, c.suppressions, verp, c.metrics, log, tracking);
  const limits = new SmtpLimits(c);
  const tls = await resolveTls(cfg, log);
  // Targets decided at RCPT, per transaction (smtp-server starts a new envelope object for each).
  const targets = new WeakMap<object, InboundTarget[]>();
  let server: SubmissionServer | undefined;
  const self = () => server as SubmissionServer;

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
      const addr = address.address.toLowerCase();
      const at = addr.lastIndexOf('@');
      const local = addr.slice(0, at);
      const domain = addr.slice(at + 1);
      const accept = (t: InboundTarget) => {
        const list = targets.get(session.envelope) ?? [];
        list.push(t);
        targets.set(session.envelope, list);
        self().connectionOf(session.id)?.progress();
        callback();
      };
      // List-Unsubscribe's mailto address (src/modules/tracking/render-plan.ts): the token is
      // base64url, so the original case of the local part counts.
      const unsub = /^unsubscribe\+([A-Za-z0-9_-]+)@/i.exec(address.address)?.[1];
      if (unsub) {
        const t = verifyToken(trackingKey, unsub, 'unsubscribe');
        if (t) return accept({ kind: 'unsubscribe', messageId: t.messageId });
        service.count('refused');
        return callback(refuse());
      }
      const token = verpTokenOf(addr);
      if (token) {
        const messageId = verp.verify(token);
        if (messageId) return accept({ kind: 'verp', messageId });
      } else if (local === 'fbl' && at > 0) {
        fblTenants(c, domain).then(
          (tenants) => {
            if (tenants === undefined) {
              service.count('refused');
              return callback(refuse());
            }
            accept({ kind: 'fbl', domain, tenants });
          },
          (err: unknown) => {
            log.error({ err }, 'inbound recipient lookup failed');
            callback(reply.tempFailure());
          },
        );
        return;
      }
      service.count('refused');
      callback(refuse());
    },

    onData(stream, session, callback) {
      receiveData(self(), session.id, stream, callback, async (message) => {
        if (!message) {
          service.count('refused');
          return { refused: reply.tooBig(INBOUND_MAX_BYTES) };
        }
        const list = targets.get(session.envelope) ?? [];
        const mailFrom = session.envelope.mailFrom ? session.envelope.mailFrom.address : '';
        try {
          const results: InboundResult[] = await service.receive(message, list, {
            from: mailFrom,
            remote: session.remoteAddress,
          });
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
    service,
    close() {
      closing ??= self().shutdown();
      return closing;
    },
  };
}
