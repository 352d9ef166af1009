/**
 * `--password-stdin` (src/cli/read-password.ts): on a terminal the password is asked for twice
 * without echo, piped input gives its first line. The terminal is a stream that says it is one
 * (isTTY, setRawMode), fed key by key as a raw-mode terminal delivers them; the piped cases go
 * through a real child process in test/dashboard/cli.test.ts.
 */
import { PassThrough, Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { PasswordInputError, readPassword } from '../../src/cli/read-password.ts';

function terminal() {
  const input = Object.assign(new PassThrough(), {
    isTTY: true,
    rawModes: [] as boolean[],
    setRawMode(mode: boolean) {
      input.rawModes.push(mode);
      return input;
    },
  });
  let shown = '';
  const output = new PassThrough();
  output.on('data', (d: Buffer) => {
    shown += d.toString('utf8');
  });
  /** Types `keys` once the prompt asking `question` is on screen. */
  const typeAfter = async (question: string, keys: string) => {
    while (!shown.includes(question)) await new Promise((r) => setTimeout(r, 1));
    for (const key of keys) input.write(key);
  };
  return { input, output, shown: () => shown, typeAfter };
}

describe('readPassword on a terminal', () => {
  it('asks twice without echo, in raw mode, and returns what was typed (backspace honoured)', async () => {
    const t = terminal();
    const reading = readPassword(t.input, t.output);
    await t.typeAfter('Password: ', 'a secret passw0rdx\u007f\r');
    await t.typeAfter('Repeat password: ', 'a secret passw0rd\r');
    expect(await reading).toBe('a secret passw0rd');
    expect(t.shown()).toBe('Password: \nRepeat password: \n');
    expect(t.shown()).not.toContain('secret');
    expect(t.input.rawModes).toEqual([true, false, true, false]);
  });

  it('refuses two different entries, an empty one and Ctrl-C', async () => {
    const differ = terminal();
    const r1 = readPassword(differ.input, differ.output);
    await differ.typeAfter('Password: ', 'one password\r');
    await differ.typeAfter('Repeat password: ', 'another one\r');
    await expect(r1).rejects.toThrow(/do not match/);

    const empty = terminal();
    const r2 = readPassword(empty.input, empty.output);
    await empty.typeAfter('Password: ', '\r');
    await expect(r2).rejects.toThrow(PasswordInputError);

    const cancelled = terminal();
    const r3 = readPassword(cancelled.input, cancelled.output);
    await cancelled.typeAfter('Password: ', 'abc\u0003');
    await expect(r3).rejects.toThrow(/cancelled/);
    expect(cancelled.input.rawModes).toEqual([true, false]);
  });
});

describe('readPassword from a pipe', () => {
  const piped = (text: string) => readPassword(Readable.from([Buffer.from(text)]), new PassThrough());

  it('takes the one line piped in, without its line break', async () => {
    expect(await piped('a good password\n')).toBe('a good password');
    expect(await piped('a good password\r\n')).toBe('a good password');
    expect(await piped('no newline at all')).toBe('no newline at all');
  });

  it('refuses nothing, several lines and a file-sized input', async () => {
    await expect(piped('')).rejects.toThrow(/no password/);
    await expect(piped('one\ntwo\n')).rejects.toThrow(/one line/);
    await expect(piped('x'.repeat(5000))).rejects.toThrow(/too long/);
  });
});
