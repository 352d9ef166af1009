// The baseline of bench:smtp: smtp-server doing the same protocol work Postyard's submission
// server does (STARTTLS, AUTH PLAIN/LOGIN, PIPELINING, SIZE, enhanced codes) but accepting any
// credentials and discarding every message. Runs in its own process, like Postyard does.
import { generate } from 'selfsigned';
import { SMTPServer } from 'smtp-server';

const pems = await generate([{ name: 'commonName', value: 'localhost' }], { keySize: 2048, algorithm: 'sha256' });
const server = new SMTPServer({
  key: pems.private,
  cert: pems.cert,
  authMethods: ['PLAIN', 'LOGIN'],
  hideENHANCEDSTATUSCODES: false,
  hideSMTPUTF8: true,
  size: 25 * 1024 * 1024,
  logger: false,
  disableReverseLookup: true,
  onAuth(auth, _session, cb) {
    cb(null, { user: auth.username });
  },
  onData(stream, _session, cb) {
    stream.on('data', () => {});
    stream.on('end', () => cb(null, '2.0.0 Ok: queued'));
  },
});
server.listen(Number(process.env.PORT), '127.0.0.1');
process.on('SIGTERM', () => server.close(() => process.exit(0)));
