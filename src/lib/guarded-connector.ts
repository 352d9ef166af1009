import type { Socket } from 'node:net';
import type { buildConnector } from 'undici';
import { ForbiddenTargetError, isForbiddenAddress } from './address-guard.ts';

/**
 * Wraps an undici connector so the address actually connected to is checked by the address
 * guard as well as the DNS answer: a name that resolves differently between the check and the
 * connection (rebinding) still cannot reach a forbidden address. Such a socket is closed before
 * anything is written to it.
 */
export function checkConnectedAddress(base: buildConnector.connector): buildConnector.connector {
  return (options, callback) =>
    base(options, (err, socket) => {
      if (err || !socket) return callback(err ?? new Error('connect failed'), null);
      const addr = (socket as Socket).remoteAddress ?? '';
      if (isForbiddenAddress(addr)) {
        socket.destroy();
        return callback(new ForbiddenTargetError(options.hostname), null);
      }
      callback(null, socket);
    });
}
