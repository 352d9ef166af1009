// A sink SMTP server that records which recipients it received, for the soak and scaling
// benchmarks: every recipient is `<letters><number>@...`; the number indexes a counter array, so
// the parent can check that each accepted message arrived exactly once. Accepts and discards, no
// TLS, no AUTH; runs in its own process (fork with serialization 'advanced' to receive the counts).
import { SMTPServer } from 'smtp-server';

let counts = new Uint8Array(Number(process.env.CAPACITY ?? 1_000_000));
let total = 0;
let unparsed = 0;

function record(address: string) {
  const m = /^[a-z]*(\d+)@/i.exec(address);
  if (!m) {
    unparsed++;
    return;
  }
  const i = Number(m[1]);
  if (i >= counts.length) {
    const bigger = new Uint8Array(Math.max(i + 1, counts.length * 2));
    bigger.set(counts);
    counts = bigger;
  }
  if ((counts[i] ?? 0) < 255) counts[i] = (counts[i] ?? 0) + 1;
}

const server = new SMTPServer({
  disabledCommands: ['AUTH', 'STARTTLS'],
  logger: false,
  disableReverseLookup: true,
  size: 50 * 1024 * 1024,
  onData(stream, session, cb) {
    stream.on('data', () => {});
    stream.on('end', () => {
      total++;
      for (const r of session.envelope.rcptTo) record(r.address);
      cb();
    });
  },
});
// Real MTAs disable Nagle; without it small replies stall on delayed ACKs (~40 ms each).
server.server.on('connection', (socket: import('node:net').Socket) => socket.setNoDelay(true));
server.listen(Number(process.env.PORT), '127.0.0.1', () => process.send?.({ ready: true }));
process.on('message', (m: { count?: boolean; dump?: boolean }) => {
  if (m.count) process.send?.({ count: total });
  if (m.dump) process.send?.({ count: total, unparsed, counts });
});
// The parent (a benchmark) is gone: do not linger as an orphan holding the port.
process.on('disconnect', () => process.exit(0));
