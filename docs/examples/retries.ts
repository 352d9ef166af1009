import { Postyard } from '@postyard/client';

const client = new Postyard({
  apiKey: process.env.POSTYARD_KEY!,
  baseUrl: process.env.POSTYARD_URL!,
  timeoutMs: 10_000, // per attempt (default 30 s)
  maxRetries: 5, // retries on 429, 5xx and network errors only (default 3)
  onRetry: ({ attempt, delayMs, error }) =>
    console.warn(`attempt ${attempt} failed (${error.code}), retrying in ${Math.round(delayMs)} ms`),
});

// Your own key makes the whole operation idempotent, even across restarts of your process:
// sending the confirmation of order 1001 twice sends one email.
const orderId = 1001;
const first = await client.transmissions.send(
  {
    recipients: [{ email: 'ann@example.com' }],
    content: { subject: `Order ${orderId} confirmed`, text: 'Thank you!' },
  },
  { idempotencyKey: `order-confirmation-${orderId}` },
);
const again = await client.transmissions.send(
  {
    recipients: [{ email: 'ann@example.com' }],
    content: { subject: `Order ${orderId} confirmed`, text: 'Thank you!' },
  },
  { idempotencyKey: `order-confirmation-${orderId}` },
);
console.log(first.transmission_id === again.transmission_id); // true
