import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync, chmodSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call } from '../helpers/context.ts';
import { eventsOf, type Harness, startHarness } from './harness.ts';

/**
 * A real Postfix from Debian is the receiving MTA: a private instance (its own config, queue and
 * data directories under a temp dir, loopback only, its own port; nothing system-wide changes)
 * accepts a message for an unknown user (local_recipient_maps empty), fails it in delivery
 * (the error transport), and sends its own DSN through its relayhost, Postyard's inbound port.
 * Runs as root with /usr/sbin/postfix installed (CI: .ci/run APT_PACKAGES); skipped otherwise.
 */
const run = promisify(execFile);
const POSTFIX = '/usr/sbin/postfix';
const skipReason = !existsSync(POSTFIX)
  ? 'postfix is not installed (apt-get install postfix)'
  : process.getuid?.() !== 0
    ? 'a private Postfix instance needs root'
    : null;

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

const SERVICES = `
cleanup   unix  n       -       n       -       0       cleanup
qmgr      unix  n       -       n       300     1       qmgr
rewrite   unix  -       -       n       -       -       trivial-rewrite
bounce    unix  -       -       n       -       0       bounce
defer     unix  -       -       n       -       0       bounce
trace     unix  -       -       n       -       0       bounce
verify    unix  -       -       n       -       1       verify
flush     unix  n       -       n       1000?   0       flush
proxymap  unix  -       -       n       -       -       proxymap
showq     unix  n       -       n       -       -       showq
smtp      unix  -       -       n       -       -       smtp
relay     unix  -       -       n       -       -       smtp
error     unix  -       -       n       -       -       error
retry     unix  -       -       n       -       -       error
discard   unix  -       -       n       -       -       discard
anvil     unix  -       -       n       -       1       anvil
scache    unix  -       -       n       -       1       scache
postlog   unix-dgram n  -       n       -       1       postlogd
nouser    unix  -       n       n       -       -       pipe
  flags=q user=nobody argv=/bin/sh -c { exit 67 }
`;

let dir = '';
let conf = '';
let h: Harness | undefined;
let started = false;

async function postfix(...args: string[]) {
  return run(POSTFIX, ['-c', conf, ...args], { timeout: 60_000 });
}

beforeAll(async () => {
  if (skipReason) return;
  const mxPort = await freePort();
  h = await startHarness({ POSTYARD_MX_PORT: String(mxPort) });
  dir = mkdtempSync(join(tmpdir(), 'postyard-postfix-'));
  chmodSync(dir, 0o755); // the postfix user walks into its queue and data directories
  conf = join(dir, 'conf');
  mkdirSync(conf);
  mkdirSync(join(dir, 'queue')); // postfix check makes its subdirectories
  mkdirSync(join(dir, 'data'));
  await run('chown', ['postfix', join(dir, 'data')]);
  writeFileSync(
    join(conf, 'main.cf'),
    `compatibility_level = 3.6
queue_directory = ${dir}/queue
data_directory = ${dir}/data
maillog_file = ${dir}/maillog
maillog_file_prefixes = ${dir}
syslog_name = postfix-postyard-test
inet_interfaces = 127.0.0.1
inet_protocols = ipv4
myhostname = mx1.dest.test
mydomain = dest.test
myorigin = dest.test
mydestination = dest.test
mynetworks = 127.0.0.0/8
# Accept any user at RCPT time; the delivery then fails (a pipe exiting EX_NOUSER, 67) and
# Postfix sends a DSN. (The error transport would not do: smtpd refuses its addresses at RCPT.)
local_recipient_maps =
local_transport = nouser
alias_maps =
alias_database =
# Everything else (the DSN to bounces+<token>@...) goes to Postyard's inbound listener.
relayhost = [127.0.0.1]:${h.inbound.port}
smtp_tls_security_level = none
smtpd_tls_security_level = none
biff = no
delay_warning_time = 0
`,
  );
  writeFileSync(join(conf, 'master.cf'), `127.0.0.1:${mxPort} inet n - n - - smtpd\n${SERVICES}`);
  await postfix('check');
  await postfix('start');
  started = true;
  // Up once smtpd answers on its port.
  const end = Date.now() + 30_000;
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const s = net.connect(mxPort, '127.0.0.1', () => {
        s.destroy();
        resolve(true);
      });
      s.on('error', () => resolve(false));
    });
    if (ok) break;
    if (Date.now() > end) throw new Error('the private postfix did not listen');
    await new Promise((r) => setTimeout(r, 200));
  }
}, 90_000);

afterAll(async () => {
  if (started) await postfix('stop').catch(() => {});
  await h?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
}, 60_000);

describe('a real Postfix bounces asynchronously to the inbound listener', () => {
  it.skipIf(skipReason !== null)(
    `Postfix accepts mail for an unknown user, then its DSN makes message.bounced async for that message${skipReason ? ` (skipped: ${skipReason})` : ''}`,
    async () => {
      const hh = h as Harness;
      const res = await call(hh.ctx.app, 'POST', '/v1/transmissions', {
        key: hh.a.apiKey,
        body: {
          recipients: [{ email: 'nobody@dest.test' }, { email: 'alsonobody@dest.test' }],
          content: { subject: 'Hello', text: 'Hello there' },
        },
      });
      expect(res.statusCode).toBe(202);
      const txId = res.json().transmission_id as string;
      const states = async () =>
        hh.ctx.c.database.db
          .selectFrom('messages')
          .select(['id', 'recipient', 'state'])
          .where('transmission_id', '=', txId)
          .orderBy('recipient')
          .execute();
      const end = Date.now() + 60_000;
      let rows = await states();
      // Postfix accepts at RCPT (delivered), fails the local delivery and returns a DSN.
      while (!rows.every((r) => r.state === 'bounced')) {
        if (Date.now() > end) {
          const log = existsSync(join(dir, 'maillog')) ? readFileSync(join(dir, 'maillog'), 'utf8') : '';
          throw new Error(`not bounced: ${JSON.stringify(rows)}\n${log.slice(-3000)}`);
        }
        await new Promise((r) => setTimeout(r, 250));
        rows = await states();
      }
      for (const r of rows) {
        const evs = await eventsOf(hh, r.id);
        expect(
          evs.map((e) => e.type),
          JSON.stringify(evs),
        ).toEqual(['message.accepted', 'message.delivered', 'message.bounced']);
        expect(evs[2]?.data).toMatchObject({ async: true, bounce_type: 'hard', enhanced_code: '5.1.1' });
        expect(String(evs[2]?.data.diagnostic)).toMatch(/User unknown/i);
      }
    },
    90_000,
  );
});
