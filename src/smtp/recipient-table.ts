import type {
  InboundClient,
  InboundRecipient,
  InboundRefusal,
  ReceivedMessage,
  RecipientHandler,
} from '../mail/recipient-handler.ts';

/** The answer to every address no handler takes: the listener is never an open relay. */
export const RELAYING_DENIED: InboundRefusal = {
  code: 550,
  enhanced: '5.7.1',
  text: 'Relaying denied: this server accepts only bounces and feedback reports',
};

/** A recipient a handler took at RCPT TO, with what it wants back after DATA. */
export interface AcceptedRecipient {
  handler: RecipientHandler;
  target: unknown;
}

export type TableDecision = { accepted: AcceptedRecipient } | { refused: InboundRefusal };

/** The recipient handlers in their registration order (src/smtp/inbound-recipients.ts). */
export class RecipientTable {
  constructor(private readonly handlers: readonly RecipientHandler[]) {}

  /**
   * The first handler that claims the address decides (accepts or refuses it); when none does, it
   * is refused as relaying. A handler's failure rejects, and the listener answers it as temporary.
   */
  async decide(recipient: InboundRecipient): Promise<TableDecision> {
    for (const handler of this.handlers) {
      const decision = await handler.match(recipient);
      if (!decision) continue;
      if ('refuse' in decision) return { refused: decision.refuse };
      return { accepted: { handler, target: decision.accept } };
    }
    return { refused: RELAYING_DENIED };
  }
}

/** An RCPT TO address split as handlers match it. */
export function recipientOf(address: string, client: InboundClient): InboundRecipient {
  const lower = address.toLowerCase();
  const at = lower.lastIndexOf('@');
  return {
    address,
    local: at < 0 ? '' : lower.slice(0, at),
    domain: at < 0 ? '' : lower.slice(at + 1),
    client,
  };
}

/** A received message whose readers run once each, whichever handlers ask for them. */
export function receivedMessage(
  raw: Buffer,
  envelope: ReceivedMessage['envelope'],
  client: InboundClient,
): ReceivedMessage {
  const reads = new Map<(raw: Buffer) => Promise<unknown>, Promise<unknown>>();
  return {
    raw,
    envelope,
    client,
    read<Result>(reader: (raw: Buffer) => Promise<Result>): Promise<Result> {
      let pending = reads.get(reader);
      if (!pending) {
        pending = reader(raw);
        reads.set(reader, pending);
      }
      return pending as Promise<Result>;
    },
  };
}
