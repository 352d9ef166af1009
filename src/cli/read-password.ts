/**
 * A password for the CLI, never from its arguments: `postyard users create --password VALUE`
 * showed the password to every local user in the process list (`ps`, /proc/<pid>/cmdline) and
 * kept it in shell history. With `--password-stdin` it is read from standard
 * input: typed at a prompt that does not echo when stdin is a terminal (asked twice), otherwise
 * the first line of what is piped in (`printf '%s\n' "$PW" | postyard users create ...`, or
 * `< file`), like `docker login --password-stdin`.
 */
import type { Readable, Writable } from 'node:stream';

/** Longest input read from a pipe: a password is one short line, not a file. */
const MAX_PIPED_BYTES = 4096;

export class PasswordInputError extends Error {}

/** What a terminal on stdin offers: node's tty.ReadStream. */
interface TtyInput extends Readable {
  isTTY?: boolean;
  setRawMode?(mode: boolean): unknown;
}

/** The piped password: the first line, without its line break; more than one line is refused. */
async function readPiped(input: Readable): Promise<string> {
  let text = '';
  for await (const chunk of input) {
    text += typeof chunk === 'string' ? chunk : (chunk as Buffer).toString('utf8');
    if (text.length > MAX_PIPED_BYTES) throw new PasswordInputError('the password on stdin is too long');
  }
  const line = text.replace(/\r?\n$/, '');
  if (/[\r\n]/.test(line)) throw new PasswordInputError('stdin must hold the password on one line');
  if (line === '') throw new PasswordInputError('no password on stdin');
  return line;
}

/** One line typed without echo (raw mode: each key arrives as it is pressed). */
function promptHidden(input: TtyInput, output: Writable, question: string): Promise<string> {
  return new Promise((resolve, reject) => {
    output.write(question);
    let typed = '';
    const done = (err: Error | null) => {
      input.off('data', onData);
      input.setRawMode?.(false);
      input.pause();
      output.write('\n');
      if (err) reject(err);
      else resolve(typed);
    };
    const onData = (chunk: Buffer | string) => {
      for (const ch of typeof chunk === 'string' ? chunk : chunk.toString('utf8')) {
        if (ch === '\r' || ch === '\n' || ch === '\u0004') return done(null);
        if (ch === '\u0003') return done(new PasswordInputError('cancelled'));
        if (ch === '\u007f' || ch === '\b') typed = typed.slice(0, -1);
        else if (ch >= ' ') typed += ch;
      }
    };
    input.setRawMode?.(true);
    input.on('data', onData);
    input.resume();
  });
}

/**
 * Reads the password for `--password-stdin`: prompted twice without echo on a terminal (the
 * prompts go to `output`, stderr by default, so stdout stays the command's answer), else piped.
 */
export async function readPassword(
  input: TtyInput = process.stdin,
  output: Writable = process.stderr,
): Promise<string> {
  if (!input.isTTY) return readPiped(input);
  const first = await promptHidden(input, output, 'Password: ');
  if (first === '') throw new PasswordInputError('no password typed');
  const again = await promptHidden(input, output, 'Repeat password: ');
  if (again !== first) throw new PasswordInputError('the passwords typed do not match');
  return first;
}
