/**
 * Postyard uses private modules of two libraries (not part of their public API, so any release
 * may change them): nodemailer's addressparser and MailComposer (src/lib/email.ts,
 * src/smtp/submission.ts, src/modules/delivery/render/mime.ts) and smtp-server's SMTPConnection, which
 * src/smtp/connection.ts subclasses and whose private fields it reads. Both are pinned exactly in
 * package.json; this file fails loudly, naming what moved, when an upgrade changes what we rely on.
 */
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import addressparser from 'nodemailer/lib/addressparser/index.js';
import MailComposer from 'nodemailer/lib/mail-composer/index.js';
import { SMTPServer } from 'smtp-server';
import { SMTPConnection } from 'smtp-server/lib/smtp-connection.js';

const root = new URL('../../', import.meta.url);
const readJson = (path: string) => JSON.parse(readFileSync(new URL(path, root), 'utf8')) as Record<string, unknown>;
const PINNED = ['nodemailer', 'smtp-server'] as const;

describe('libraries whose internals Postyard uses', () => {
  it('are pinned to one exact version in package.json, and that version is the one installed', () => {
    const deps = readJson('package.json').dependencies as Record<string, string>;
    for (const name of PINNED) {
      const installed = readJson(`node_modules/${name}/package.json`).version;
      expect(deps[name], `${name} must be pinned exactly (no ^ or ~): its private modules are used`).toMatch(
        /^\d+\.\d+\.\d+$/,
      );
      expect(installed, `${name}: installed version differs from the pinned one`).toBe(deps[name]);
    }
  });
});

describe('nodemailer internals', () => {
  it('addressparser splits lists, keeps quoted commas in names, and flattens groups', () => {
    expect(addressparser('"Doe, Jane" <jane@example.test>, bob@example.test')).toEqual([
      { name: 'Doe, Jane', address: 'jane@example.test' },
      { name: '', address: 'bob@example.test' },
    ]);
    // checkMailbox relies on text after the address being folded into the name.
    expect(addressparser('Boss <ceo@a.test> <me@mine.test>')).toEqual([
      { name: 'Boss me@mine.test', address: 'ceo@a.test' },
    ]);
    expect(addressparser('Team: a@example.test, b@example.test;', { flatten: true })).toEqual([
      { name: '', address: 'a@example.test' },
      { name: '', address: 'b@example.test' },
    ]);
  });

  it('MailComposer compiles to a node whose build() resolves to the message bytes', async () => {
    const composer = new MailComposer({
      from: { name: 'Sender', address: 'from@example.test' },
      to: 'to@example.test',
      subject: 'pinned',
      text: 'hello\r\n',
      headers: { 'X-Pinned': 'yes' },
      messageId: '<pinned@example.test>',
      date: new Date('2020-01-01T00:00:00Z'),
      disableFileAccess: true,
      disableUrlAccess: true,
    });
    const raw = await composer.compile().build();
    expect(Buffer.isBuffer(raw)).toBe(true);
    const text = raw.toString('utf8');
    expect(text).toContain('From: Sender <from@example.test>\r\n');
    expect(text).toContain('To: to@example.test\r\n');
    expect(text).toContain('Subject: pinned\r\n');
    expect(text).toContain('X-Pinned: yes\r\n');
    expect(text).toContain('Message-ID: <pinned@example.test>\r\n');
    expect(text).toContain('\r\n\r\nhello\r\n');
  });
});

describe('smtp-server internals (src/smtp/connection.ts)', () => {
  let server: SMTPServer;
  let port: number;
  beforeAll(async () => {
    server = new SMTPServer({ logger: false, authOptional: true, disabledCommands: ['STARTTLS'] });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.server.address() as net.AddressInfo).port;
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it('SMTPServer builds connections in connect() and has the handlers our copy of it calls', () => {
    const proto = SMTPServer.prototype as unknown as Record<string, unknown>;
    for (const name of ['connect', '_onError', '_onClientConnect']) {
      expect(typeof proto[name], `SMTPServer.prototype.${name}`).toBe('function');
    }
    // Our connect() mirrors the library's: a change to its body means ours must be re-checked.
    const body = String(proto.connect);
    for (const step of [
      'new SMTPConnection(this, socket, socketOptions)',
      'this.connections.add(connection)',
      'connection.init()',
    ]) {
      expect(body, `SMTPServer.prototype.connect no longer contains ${step}`).toContain(step);
    }
    expect(server.connections).toBeInstanceOf(Set);
    const conn = SMTPConnection.prototype as unknown as Record<string, unknown>;
    for (const name of ['send', 'handler_AUTH', 'init']) {
      expect(typeof conn[name], `SMTPConnection.prototype.${name}`).toBe('function');
    }
  });

  it('a live connection has the private fields we read, and send(code, text, false) omits the enhanced code', async () => {
    const socket = net.connect(port, '127.0.0.1');
    let received = '';
    const waitFor = (re: RegExp) =>
      new Promise<void>((resolve, reject) => {
        const check = () => {
          if (re.test(received)) {
            socket.off('data', onData);
            resolve();
          }
        };
        const onData = (d: Buffer) => {
          received += d.toString('latin1');
          check();
        };
        socket.on('data', onData);
        socket.once('error', reject);
        check();
      });
    try {
      await waitFor(/^220 /m);
      socket.write('EHLO client.test\r\n');
      await waitFor(/^250 /m);
      const [c] = [...server.connections];
      expect(c).toBeInstanceOf(SMTPConnection);
      const fields = c as unknown as Record<string, unknown>;
      expect(fields._server).toBe(server);
      for (const name of ['_handlerPending', '_closing', '_closed']) {
        expect(typeof fields[name], `SMTPConnection#${name}`).toBe('boolean');
      }
      expect(c?.session.envelope).toBeDefined();
      received = '';
      c?.send(451, '4.7.1 Own enhanced code', false);
      await waitFor(/\r\n/);
      expect(received).toBe('451 4.7.1 Own enhanced code\r\n');
    } finally {
      socket.destroy();
    }
  });
});
