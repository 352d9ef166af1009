// A stand-in render thread for the watchdog tests of render-pool.ts: speaks the render thread's
// protocol (ready, started, replies); a message whose recipient starts with "stall" never returns.
import { parentPort } from 'node:worker_threads';

const port = parentPort;
port.on('message', (req) => {
  port.postMessage({ started: req.id });
  if (req.msg.recipient.startsWith('stall')) for (;;);
  const raw = new TextEncoder().encode(`To: ${req.msg.recipient}\r\n\r\nok\r\n`);
  port.postMessage({ id: req.id, ok: true, envelopeFrom: 'bounces@example.test', raw, signed: false });
});
port.postMessage({ ready: true });
