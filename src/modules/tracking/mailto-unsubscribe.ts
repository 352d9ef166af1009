import type { RecipientHandler } from '../../mail/recipient-handler.ts';
import { deriveTokenKey, verifyToken } from './token.ts';
import type { TrackingService } from './tracking.service.ts';

/**
 * `unsubscribe+<signed tracking token>@<any domain>`: the List-Unsubscribe mailto address of a
 * marketing message (render-plan.ts), a recipient handler of the inbound listener (registered in
 * src/smtp/inbound-recipients.ts). Any message sent there is the request (RFC 2369): what it says
 * does not matter, so it is never read.
 */
export function mailtoUnsubscribe(tracking: TrackingService, masterKey: Buffer): RecipientHandler<string> {
  const key = deriveTokenKey(masterKey);
  return {
    name: 'unsubscribe',
    match(recipient) {
      // The token is base64url, so the original case of the local part counts.
      const token = /^unsubscribe\+([A-Za-z0-9_-]+)@/i.exec(recipient.address)?.[1];
      const verified = token ? verifyToken(key, token, 'unsubscribe') : null;
      return verified ? { accept: verified.messageId } : null;
    },
    async receive(message, messageId) {
      const client = { ip: message.client.address, userAgent: '' };
      return { result: (await tracking.unsubscribe(messageId, 'mailto', client)) ? 'unsubscribe' : 'unmatched' };
    },
  };
}
