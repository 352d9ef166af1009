import type { SMTPServerOptions } from 'smtp-server';
import type { Config } from '../config.ts';
import type { SmtpLimits } from './limits.ts';

/** How long a graceful stop waits for sessions in the middle of a message (docs/operations.md "Signals and health"). */
export const GRACE_MS = 10_000;
/** Hard cap on connections per listener, whatever the per-IP and per-credential limits say. */
export const MAX_CLIENTS = 5_000;

/**
 * The smtp-server options every Postyard listener shares (submission and inbound): extensions
 * offered, no reverse lookups, PROXY protocol, timeouts, connection caps and the per-address
 * connection limit. Each listener adds its own name, TLS, AUTH, size and handlers.
 */
export function sharedListenerOptions(cfg: Config, limits: SmtpLimits): SMTPServerOptions {
  return {
    hideENHANCEDSTATUSCODES: false,
    // Addresses are validated as ASCII (shared with the API) and delivery does not negotiate
    // SMTPUTF8 yet, so it is not offered; 8BITMIME bodies are accepted and relayed.
    hideSMTPUTF8: true,
    hideDSN: true,
    hideREQUIRETLS: true,
    // No PTR query per connection: slow, and nothing here uses the client's hostname.
    disableReverseLookup: true,
    // Behind a TCP load balancer: the listed peers send a PROXY v1 header first, and the client
    // address in it is the one the per-address limits and logs use.
    ...(cfg.smtpProxyProtocol ? { useProxy: cfg.smtpProxyProtocol } : {}),
    logger: false,
    socketTimeout: cfg.smtpIdleTimeoutSeconds * 1000,
    closeTimeout: GRACE_MS,
    maxClients: MAX_CLIENTS,
    // RFC 5321 allows 512 octets per command line; AUTH lines are longer but far below this.
    maxCommandLength: 4096,
    onConnect(session, callback) {
      callback(limits.openConnection(session.id, session.remoteAddress));
    },
  };
}
