// A bare SMTP sink for the delivery benchmark: accepts and discards, counts messages, no TLS.
// Runs in its own process so it does not share the event loop with the code being measured.
import { SMTPServer } from 'smtp-server';

let count = 0;
const server = new SMTPServer({
  disabledCommands: ['AUTH', 'STARTTLS'],
  logger: false,
  disableReverseLookup: true,
  size: 50 * 1024 * 1024,
  onData(stream, _session, cb) {
    stream.on('data', () => {});
    stream.on('end', () => {
      count++;
      cb();
    });
  },
});
// Real MTAs disable Nagle; without it small replies stall on delayed ACKs (~40 ms each).
server.server.on('connection', (socket: import('node:net').Socket) => socket.setNoDelay(true));
server.listen(Number(process.env.PORT), '127.0.0.1', () => process.send?.({ ready: true }));
process.on('message', (m: { count?: boolean }) => {
  if (m.count) process.send?.({ count });
});
