import { Counter, type Registry } from 'prom-client';

/**
 * postyard_inbound_messages_total{result}: what the inbound listener did with each recipient of
 * each message (src/smtp/inbound-listener.ts): `refused` at RCPT TO or for size, else the result
 * its recipient handler gave (`bounce`, `delayed`, `complaint`, `auto_reply`, `unsubscribe`,
 * `unmatched`, and whatever a new handler adds).
 */
export function inboundCounter(registry: Registry): Counter<'result'> {
  const name = 'postyard_inbound_messages_total';
  const existing = registry.getSingleMetric(name) as Counter<'result'> | undefined;
  return (
    existing ??
    new Counter({
      name,
      help: 'Inbound messages (DSNs, complaints, auto-replies) by result',
      labelNames: ['result'] as const,
      registers: [registry],
    })
  );
}
